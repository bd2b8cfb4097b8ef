"""``llama-bindgen make-test-model``: write a tiny synthetic qwen35 GGUF for MTP tests, or a
draft (EAGLE-3, DFlash, DSpark) for such a target."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from generator.errors import UsageError
from generator.testdrafts import DRAFT_KINDS, write_test_draft
from generator.testmodel import KINDS, VOCABULARIES, WEIGHT_TYPES, ModelSizes, write_test_model

# Sizes worth a command-line option; the rest keep their defaults.
_SIZE_OPTIONS: tuple[tuple[str, str], ...] = (
    ("embd", "embedding length"),
    ("ff", "feed-forward length"),
    ("layers", "trunk layers (the NextN block comes on top)"),
    ("vocab", "vocabulary size"),
    ("heads", "attention heads"),
    ("kv_heads", "key/value heads"),
    ("head_dim", "size of one attention head"),
    ("full_attention_interval", "every N-th trunk layer is full attention, the rest recurrent"),
    ("context", "training context length written into the file"),
    ("disagree_every", "partial kinds, draft: wrong for tokens that are multiples of N"),
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    defaults = ModelSizes()
    parser = subparsers.add_parser(
        "make-test-model",
        help="write a tiny synthetic qwen35 GGUF model (or a draft for one) for MTP tests",
        description=(
            "Write a synthetic qwen35 GGUF whose trunk predicts token t+1 after token t. "
            "agree: one NextN (MTP) block that agrees with the trunk almost always; "
            "partial: a NextN block that disagrees for some tokens; plain: no NextN block; "
            "draft: no NextN block and a trunk that disagrees for some tokens (a draft model "
            "for draft-simple, sharing the vocabulary). "
            "eagle3, dflash, dspark: a draft for draft-eagle3, draft-dflash or draft-dspark that "
            "reads the layers of the target of the same seed, sizes and vocabulary (write that "
            "target with the same options and another kind) and predicts what it does; their "
            "-partial kinds disagree for some tokens. A draft is f32 and has no chat template. "
            "Same arguments give identical bytes. Prints the file's path."
        ),
    )
    parser.add_argument("out", type=Path, help="path of the GGUF file to write")
    parser.add_argument(
        "--kind", choices=KINDS + DRAFT_KINDS, default="agree", help="default: %(default)s"
    )
    parser.add_argument("--seed", type=int, default=0, help="default: %(default)s")
    for name, text in _SIZE_OPTIONS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=int,
            default=getattr(defaults, name),
            metavar="N",
            help=f"{text} (default: %(default)s)",
        )
    parser.add_argument(
        "--weight-type",
        dest="weight_type",
        choices=WEIGHT_TYPES,
        default=defaults.weight_type,
        help="type of the matrices; norms stay f32; drafts: f32 only (default: %(default)s)",
    )
    parser.add_argument(
        "--vocabulary",
        choices=VOCABULARIES,
        default="test",
        help="test: llama.cpp's hex-id test tokenizer; bytes: SentencePiece byte tokens ordered so "
        "that greedy output after '~' splits multi-byte characters over tokens (needs --vocab "
        ">= 259) (default: %(default)s)",
    )
    parser.add_argument(
        "--chat-template",
        dest="chat_template",
        metavar="TEXT",
        default=None,
        help="write TEXT as tokenizer.chat_template; not for a draft (default: none)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    sizes: dict[str, Any] = {name: getattr(args, name) for name, _ in _SIZE_OPTIONS}
    sizes["weight_type"] = args.weight_type
    shape = ModelSizes(**sizes)
    shape.validate()
    if args.kind in DRAFT_KINDS:
        return _write_draft(args, shape)
    parameters = _parameter_count(shape)
    big = parameters > 10_000_000
    if big:
        print(f"writing {args.kind} test model (~{parameters:,} parameters)", file=sys.stderr)
    path = write_test_model(
        args.out, args.kind, args.seed, progress=big, vocabulary=args.vocabulary,
        chat_template=args.chat_template, **dataclasses.asdict(shape),
    )  # fmt: skip
    print(path)
    return 0


def _write_draft(args: argparse.Namespace, target: ModelSizes) -> int:
    """A draft of ``args.kind`` for the target ``target`` describes."""
    if args.chat_template is not None:
        raise UsageError(f"--chat-template: the {args.kind} draft carries no chat template")
    if target.weight_type != "f32":
        raise UsageError(f"--weight-type {target.weight_type}: the {args.kind} draft is f32 only")
    sizes = {name: getattr(target, name) for name, _ in _SIZE_OPTIONS}
    print(write_test_draft(args.out, args.kind, args.seed, vocabulary=args.vocabulary, **sizes))
    return 0


def _parameter_count(sizes: ModelSizes) -> int:
    """Rough count (matrices only) to decide whether to show progress."""
    per_layer = 3 * sizes.embd * sizes.ff + 4 * sizes.embd * sizes.head_dim * sizes.heads
    return 2 * sizes.embd * sizes.vocab + (sizes.layers + 1) * per_layer
