"""Layouts found at the host's definition sites equal those from walking each target's parse."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.parse import declarations
from generator.parse.frontend import HOST_TARGET, _parse_target
from generator.parse.options import ParseOptions
from generator.platforms import DEFAULT_TARGETS
from generator.sources.tree import Tree

pytestmark = pytest.mark.needs_tree


@pytest.mark.parametrize("target", sorted(set(DEFAULT_TARGETS) - {HOST_TARGET}))
def test_lookup_by_location_equals_the_walk(tree_b11312: Path, target: str) -> None:
    tree = Tree.read(tree_b11312)
    options = ParseOptions(tree.root, tree.wrapper_header)
    found = declarations.collect(_parse_target(options, HOST_TARGET), options)
    enums = set(found.enums)
    host = declarations.collect_layouts(_parse_target(options, HOST_TARGET), found.records, enums)
    assert host.locations  # the walk remembered where each definition is
    tu = _parse_target(options, target)
    looked_up = declarations._layouts_at(tu, found.records, enums, host.locations)
    walked = declarations._layouts_by_walking(tu, found.records, enums)
    assert looked_up is not None, "a definition was not where the host parse had it"
    assert looked_up.records == walked.records
    assert looked_up.enum_sizes == walked.enum_sizes


def test_a_definition_missing_from_a_target_falls_back_to_the_walk(tree_b11312: Path) -> None:
    tree = Tree.read(tree_b11312)
    options = ParseOptions(tree.root, tree.wrapper_header)
    found = declarations.collect(_parse_target(options, HOST_TARGET), options)
    enums = set(found.enums)
    host = declarations.collect_layouts(_parse_target(options, HOST_TARGET), found.records, enums)
    key, (file, line, column) = next(iter(sorted(host.locations.items())))
    moved = {**host.locations, key: (file, line + 1, column)}  # no longer the definition
    tu = _parse_target(options, "aarch64-linux-gnu")
    assert declarations._layouts_at(tu, found.records, enums, moved) is None
    result = declarations.collect_layouts(tu, found.records, enums, moved)
    assert result.records == declarations._layouts_by_walking(tu, found.records, enums).records
