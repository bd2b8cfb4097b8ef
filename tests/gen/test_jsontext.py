"""The canonical JSON writer of ir.json and abi_manifest.json."""

from __future__ import annotations

import json

from generator import jsontext


def test_round_trips_and_sorts_keys() -> None:
    data = {"b": [{"y": 1, "x": [1, 2]}, {"z": None}], "a": {"k": {"deep": [True]}}, "e": []}
    text = jsontext.dumps(data, depth=2)
    assert json.loads(text) == data
    assert text.index('"a"') < text.index('"b"') < text.index('"e"')


def test_expands_to_the_depth_then_one_value_per_line() -> None:
    data = {"functions": [{"name": "f", "params": [1, 2]}, {"name": "g", "params": []}]}
    lines = jsontext.dumps(data, depth=2).splitlines()
    assert lines == [
        "{",
        '  "functions": [',
        '    {"name": "f", "params": [1, 2]},',
        '    {"name": "g", "params": []}',
        "  ]",
        "}",
    ]


def test_depth_zero_is_one_line_and_deterministic() -> None:
    data = {"z": 1, "a": ["\u00e9"]}
    assert jsontext.dumps(data, depth=0) == '{"a": ["\\u00e9"], "z": 1}'
    assert jsontext.dumps(dict(reversed(data.items())), depth=3) == jsontext.dumps(data, depth=3)
