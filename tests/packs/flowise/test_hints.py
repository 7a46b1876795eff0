"""The node hints are data with their provenance, and they name real Flowise nodes."""

from __future__ import annotations

import json
import re
from importlib.resources import files

import pytest

from agentloom.packs.flowise.hints import FILE, HINTS
from tests.packs.flowise.live import VERSION, flowise_home


def _data() -> dict:
    return json.loads(files("agentloom.packs.flowise").joinpath(FILE).read_text(encoding="utf-8"))


def test_every_hint_says_which_node_source_it_names() -> None:
    data = _data()
    assert data["provenance"]["flowise"] == VERSION
    assert data["provenance"]["flowise_components"]
    entries = [(name, entry) for group in data["groups"] for name, entry in group["nodes"].items()]
    names = [name for name, _ in entries]
    assert len(names) == len(set(names)), "a node is in two groups"
    assert len(entries) == len(HINTS) > 200
    for name, entry in entries:
        assert set(entry) == {"hint", "node_source"}, name
        assert entry["hint"].strip() and HINTS[name] == entry["hint"], name
        assert re.fullmatch(r"nodes/[\w/.-]+\.ts", entry["node_source"]), (name, entry["node_source"])


def test_every_node_source_defines_its_node() -> None:
    components = flowise_home() / "node_modules" / "flowise-components"
    if not (components / "package.json").is_file():
        pytest.skip(f"Flowise {VERSION} is not installed at {flowise_home()} (scripts/flowise-test-server.sh install)")
    data = _data()
    version = json.loads((components / "package.json").read_text(encoding="utf-8"))["version"]
    assert version == data["provenance"]["flowise_components"]
    for group in data["groups"]:
        for name, entry in group["nodes"].items():
            source = (components / entry["node_source"]).read_text(encoding="utf-8")
            assert re.search(rf"this\.name\s*=\s*['\"]{re.escape(name)}['\"]", source), (name, entry["node_source"])
