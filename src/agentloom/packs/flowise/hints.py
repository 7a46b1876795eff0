"""What people call a node and what they know it for, where its definition does not say so.

Flowise's definitions describe a node in one terse line ("Wrapper around Open Router Inference
API", "Load data from webpages"). A user asks in their own terms: the model family a provider
serves, a file format's long name, where the data lives, what a technique does. Those facts are
general knowledge about the vendors and LangChain, not in the catalog, so they are written once
per node (by node name; a node the server lacks is simply never looked up) and added to the
node's text for both the embedding and the keyword leg of search.

The facts are data, not code: ``node_hints.json`` beside this module holds each hint with the
Flowise source file its node name was read from, and the Flowise version of those files.

The first evaluation set's misses were known when the hints were written, so that set no longer
measures search fairly; the held-out set (benchmarks/data/flowise_node_needs_heldout.json, written
by someone who saw neither these hints nor any search result) does.
"""

from __future__ import annotations

import json
from importlib.resources import files

FILE = "node_hints.json"


def load_hints() -> dict[str, str]:
    """Every hint by node name, from the package's data file."""
    data = json.loads(files(__package__ or "agentloom.packs.flowise").joinpath(FILE).read_text(encoding="utf-8"))
    return {name: entry["hint"] for group in data["groups"] for name, entry in group["nodes"].items()}


HINTS: dict[str, str] = load_hints()
