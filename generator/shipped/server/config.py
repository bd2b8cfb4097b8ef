"""The server's settings: flags, an optional TOML file (``--config``; flags given on the command
line win over it) and the API key's environment variable.

The TOML file takes :class:`ServerConfig`'s fields, the flags' long names with ``_`` for ``-``
(``model = "m.gguf"``, ``lora = ["a.gguf:0.5"]``, ``slots = 8``, ...); an unknown key is an
error."""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from ..constants import SpeculativeMode

API_KEY_VARIABLE: Final = "LLAMA_BINDINGS_API_KEY"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8080  # llama.cpp's llama-server's


@dataclass(frozen=True)
class ServerConfig:
    """What ``llama-bindings serve`` runs: the model and its parts, the slots, the network."""

    model: str
    mmproj: str | None = None
    lora: tuple[str, ...] = ()  # "path" or "path:scale"
    draft_model: str | None = None
    speculative: str = "none"  # a mode or a mix: "draft-mtp", "ngram-mod+draft-mtp", ...
    draft_max: int | None = None
    slots: int = 4
    ctx_size: int = 4096  # cells per slot
    threads: int | None = None
    batch_size: int | None = None  # the logical batch (default: the runtime's)
    ubatch_size: int | None = None  # the physical batch (1, with repack off: batch-independent)
    kv_unified: bool = True  # one KV buffer for every slot (False: one per slot)
    repack: bool = True  # False: Model(use_extra_bufts=False)
    deterministic: bool = False  # Context(deterministic=True): a greedy reply as it is alone
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = field(default=None, repr=False)
    chat_template: str | None = None  # a builtin format's name or Jinja text (default the GGUF's)
    chat_template_file: str | None = None  # a file of Jinja text
    slot_save_path: str | None = None  # a folder: POST /slots/{id}?action=save|restore
    alias: str | None = None  # the model's id in requests and /v1/models (default: file stem)
    max_waiting: int = 64  # requests waiting for a slot; more: 503
    max_body_bytes: int = 16 * 1024 * 1024
    shutdown_timeout: float = 30.0  # seconds in-flight requests get on SIGTERM

    def __post_init__(self) -> None:
        for name in ("slots", "ctx_size", "port"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1")
        self.modes  # noqa: B018  (an unknown mode raises here, before anything loads)
        if self.chat_template is not None and self.chat_template_file is not None:
            raise ValueError("--chat-template or --chat-template-file, not both")
        if self.deterministic and self.ubatch_size not in (None, 1):
            raise ValueError("--deterministic decodes one token per pass: not --ubatch-size "
                             f"{self.ubatch_size}")  # fmt: skip
        for name in ("max_waiting", "max_body_bytes"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0")

    @property
    def modes(self) -> tuple[SpeculativeMode, ...]:
        """``speculative``: a mode, or modes joined with ``+`` (ValueError naming the known
        ones for any other)."""
        known = [mode.value for mode in SpeculativeMode]
        modes = [mode.strip() for mode in self.speculative.split("+")]
        for mode in modes:
            if mode not in known:
                raise ValueError(
                    f"unknown speculative mode {mode!r}: one of {', '.join(known)}, or several "
                    "joined with '+'"
                )
        return tuple(SpeculativeMode(mode) for mode in modes)

    @property
    def template(self) -> str | None:
        """The chat template the server renders with (None: the GGUF's own)."""
        if self.chat_template_file is not None:
            return Path(self.chat_template_file).read_text(encoding="utf-8")
        return self.chat_template

    @property
    def model_id(self) -> str:
        return self.alias if self.alias else Path(self.model).stem


_SETTINGS: Final = {f.name for f in fields(ServerConfig)}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llama-bindings serve",
        description="An OpenAI-compatible server on one model: slots with continuous batching, "
        "every speculative mode per slot.",
        argument_default=argparse.SUPPRESS,  # unset flags leave the TOML's value
    )
    add = parser.add_argument
    add("--config", help="a TOML file of these settings (flags win over it)")
    add("--model", "-m", help="the GGUF model")
    add("--mmproj", help="the multimodal projector GGUF (images, audio)")
    add("--lora", action="append", help="a LoRA adapter, path or path:scale (repeatable)")
    add("--draft-model", help="the draft model (draft-simple, draft-eagle3, draft-dflash, ...)")
    add("--speculative", help="speculative mode or mix, e.g. draft-mtp, ngram-mod+draft-mtp")
    add("--draft-max", type=int, help="most draft tokens per step")
    add("--slots", "-np", type=int, help="parallel slots (sequences of one context; default 4)")
    add("--ctx-size", "-c", type=int, help="cells per slot (default 4096)")
    add("--threads", "-t", type=int, help="CPU threads (default: the runtime's)")
    add("--batch-size", "-b", type=int, help="logical batch (default: the runtime's, 512)")
    add("--ubatch-size", "-ub", type=int, help="physical batch (default: the logical batch)")
    add("--no-kv-unified", dest="kv_unified", action="store_false",
        help="a KV buffer per slot instead of one for all (llama.cpp's default for contexts; "
        "one shared buffer decodes many slots faster)")  # fmt: skip
    add(
        "--no-repack",
        dest="repack",
        action="store_false",
        help="keep the CPU weights as stored (llama.cpp repacks them by default)",
    )
    add("--deterministic", action="store_true",
        help="every greedy reply equal to the same request served alone, whatever else the slots "
        "run: one token per pass, a KV buffer per slot (slower: see the serving docs)")  # fmt: skip
    add("--host", help=f"address to listen on (default {DEFAULT_HOST})")
    add("--port", type=int, help=f"TCP port (default {DEFAULT_PORT})")
    add("--api-key", help=f"require this key (also from ${API_KEY_VARIABLE})")
    add("--chat-template", help="the chat template: a builtin name (chatml) or Jinja text")
    add("--chat-template-file", help="the chat template's Jinja text from a file")
    add("--slot-save-path", help="folder for slot states (POST /slots/ID?action=save|restore)")
    add("--alias", help="the model's id in requests (default: the file's stem)")
    add("--max-waiting", type=int, help="requests that may wait for a slot (default 64)")
    add("--max-body-bytes", type=int, help="largest request body (default 16 MiB)")
    add("--shutdown-timeout", type=float, help="seconds in-flight requests get on SIGTERM")
    return parser


def parse_config(argv: Sequence[str], environ: dict[str, str] | None = None) -> ServerConfig:
    """The settings of ``argv`` (the flags after ``serve``); ``ValueError`` when they are wrong."""
    given = vars(_parser().parse_args(list(argv)))
    settings: dict[str, Any] = {}
    path = given.pop("config", None)
    if path is not None:
        with open(path, "rb") as file:
            settings = tomllib.load(file)
        unknown = sorted(set(settings) - _SETTINGS)
        if unknown:
            raise ValueError(f"{path}: unknown setting(s) {', '.join(unknown)}")
    settings.update(given)
    if "model" not in settings:
        raise ValueError("a model is needed: --model m.gguf (or model = ... in --config)")
    if "lora" in settings:
        settings["lora"] = tuple(settings["lora"])
    config = ServerConfig(**settings)
    env = os.environ if environ is None else environ
    if config.api_key is None and env.get(API_KEY_VARIABLE):
        config = replace(config, api_key=env[API_KEY_VARIABLE])
    return config


def lora_of(item: str) -> tuple[str, float]:
    """``"path"`` or ``"path:scale"`` as (path, scale)."""
    path, sep, scale = item.rpartition(":")
    if sep and path:
        try:
            return path, float(scale)
        except ValueError:
            pass
    return item, 1.0
