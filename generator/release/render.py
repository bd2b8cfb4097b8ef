"""The jinja2 environment of the release and CI templates (``templates/release``, ``/ci``)."""

from __future__ import annotations

from typing import Any

import jinja2

from generator.paths import templates_dir


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
