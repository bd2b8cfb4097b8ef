"""Rendering the release and CI templates (``templates/release``, ``templates/ci``) with the one
project environment (``generator.templating``)."""

from __future__ import annotations

from typing import Any

from generator.templating import environment


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
