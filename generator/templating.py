"""The one jinja2 environment for everything under ``generator/templates/``."""

from __future__ import annotations

import jinja2
from jinja2.bccache import Bucket

from generator.paths import default_cache_dir, templates_dir

BYTECODE_FOLDER = "jinja-bytecode"


class _BestEffortBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept in the cache folder, like ``.pyc`` files: compiling the templates
    was a tenth of ``generate``'s run time. jinja2 keys each entry by the template's source
    checksum and its own and Python's versions, so an edited template is compiled again. A cache
    that cannot be written only costs the compile."""

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    folder = default_cache_dir() / BYTECODE_FOLDER
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _BestEffortBytecodeCache(str(folder))


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def docstring(text: str, indent: int = 0) -> str:
    """Text safe inside a triple-quoted docstring, continuation lines indented."""
    safe = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    # ASCII only: non-ASCII characters become escapes (ruff flags look-alike characters)
    if not safe.isascii():
        safe = "".join(c if ord(c) < 128 else _escape(c) for c in safe)
    if safe.endswith('"'):
        safe += " "
    pad = " " * indent
    lines = [line.rstrip() for line in safe.splitlines()]
    return (
        "\n".join([lines[0], *[(pad + line) if line else "" for line in lines[1:]]])
        if lines
        else ""
    )


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["docstring"] = docstring
    env.globals["docblock"] = docblock
    return env


def docblock(parts: list[str], indent: int) -> str:
    """A whole docstring from paragraphs (empty ones dropped), indented, quotes included."""
    pad = " " * indent
    paragraphs = [docstring(p.strip("\n"), indent) for p in parts if p and p.strip()]
    if not paragraphs:
        return f'{pad}""""""'
    body = f"\n\n{pad}".join(paragraphs)
    if len(paragraphs) == 1 and "\n" not in body:
        return f'{pad}"""{body}"""'
    return f'{pad}"""{body}\n{pad}"""'
