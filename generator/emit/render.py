"""jinja2 environment for everything under ``templates/``."""

from __future__ import annotations

import jinja2

from generator.paths import templates_dir


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def docstring(text: str, indent: int = 0) -> str:
    """Text safe inside a triple-quoted docstring, continuation lines indented."""
    safe = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    # ASCII only: non-ASCII characters become escapes (ruff flags look-alike characters)
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
