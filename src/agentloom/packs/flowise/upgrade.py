"""Bring a template's nodes to the server's current definitions, as the canvas's "sync nodes" does.

Marketplace templates were saved with the node versions of their day (``chatOpenAI`` 6 where
the server has 8.3). Flowise validates a flow against its current definitions, so an old node
misses inputs that are now required (seen: "Reasoning Effort is required" on the Tool Agent
template), and the canvas flags it as outdated. Upgrading re-initialises the node from the
catalog with the same id, carries over every input value whose name and kind still exist
(connections included), and re-points the node's edges at the new handles. A node whose
edges would no longer fit (an input gone, an output of other classes) keeps its old version.
Edges whose handles are not on their nodes at all (stale handles) are re-pointed too.

Sticky notes are dropped: they are comments on the canvas, and Flowise's ``/validation``
reports each one as "not connected to anything".
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from agentloom.packs.flowise.flowdata import (
    Json,
    chosen_output,
    compatible,
    edge_id,
    init_node_data,
    input_name,
    input_slot,
    is_sticky,
)


def without_notes(flow: Mapping[str, Any]) -> Json:
    copied: Json = copy.deepcopy(dict(flow))
    copied["nodes"] = [n for n in copied.get("nodes", []) if not is_sticky(n)]
    kept = {n["id"] for n in copied["nodes"]}
    copied["edges"] = [e for e in copied.get("edges", []) if e.get("source") in kept and e.get("target") in kept]
    return copied


def upgrade_nodes(flow: Json, catalog: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Upgrade, in place, every node older than the catalog's definition; returns the upgraded ids."""
    upgraded = []
    for node in flow["nodes"]:
        old = node["data"]
        definition = catalog.get(old.get("name"))
        if definition is None or old.get("version") == definition.get("version"):
            continue
        new = _carried_over(old, init_node_data(definition, node["id"]))
        edges = _repointed(flow["edges"], node["id"], new)
        if edges is None:
            continue
        node["data"] = new
        flow["edges"] = edges
        upgraded.append(node["id"])
    _repair_handles(flow)
    return upgraded


def _repair_handles(flow: Json) -> None:
    """Edges whose handle is not on their node (two templates carry stale Pinecone handles) are
    re-pointed at the handle the node has, when its classes still fit."""
    nodes = {n["id"]: n["data"] for n in flow["nodes"]}
    for edge in flow["edges"]:
        source, target = nodes.get(edge["source"]), nodes.get(edge["target"])
        if source is None or target is None:
            continue
        output = chosen_output(source)
        slot = input_slot(target, input_name(edge["targetHandle"]))
        if output is None or slot is None or not compatible(output["id"], slot["id"]):
            continue
        edge["sourceHandle"], edge["targetHandle"] = output["id"], slot["id"]
        edge["id"] = edge_id(edge["source"], edge["sourceHandle"], edge["target"], edge["targetHandle"])


def _carried_over(old: Mapping[str, Any], new: Json) -> Json:
    old_kinds = {i["name"]: i.get("type") for i in [*old.get("inputParams", []), *old.get("inputAnchors", [])]}
    new_kinds = {i["name"]: i.get("type") for i in [*new["inputParams"], *new["inputAnchors"]]}
    for name, value in (old.get("inputs") or {}).items():
        if name in new["inputs"] and old_kinds.get(name) == new_kinds.get(name) and value not in ("", None):
            new["inputs"][name] = value
    chosen = (old.get("outputs") or {}).get("output")
    if chosen and "output" in new["outputs"]:
        options = {o.get("name") for a in new["outputAnchors"] for o in a.get("options") or []}
        if chosen in options:
            new["outputs"]["output"] = chosen
    return new


def _repointed(edges: list[Json], node_id: str, data: Json) -> list[Json] | None:
    output = chosen_output(data)
    result = []
    for edge in edges:
        edge = dict(edge)
        if edge["source"] == node_id:
            if output is None or not compatible(output["id"], edge["targetHandle"]):
                return None
            edge["sourceHandle"] = output["id"]
        if edge["target"] == node_id:
            slot = input_slot(data, input_name(edge["targetHandle"]))
            if slot is None or not compatible(edge["sourceHandle"], slot["id"]):
                return None
            edge["targetHandle"] = slot["id"]
        edge["id"] = edge_id(edge["source"], edge["sourceHandle"], edge["target"], edge["targetHandle"])
        result.append(edge)
    return result
