"""flowData from a stored compact design: ``{nodes, connections, config}``.

The design names its nodes and which feeds which; it does not name handles. Each connection
``[from, to]`` is made on the first input of ``to`` that takes ``from``'s classes and is still
free (a list input such as ``tools`` is never full); ``from`` and ``to`` are node names (the
first node of that name not yet used for that role) or node ids (``chatOpenAI_1``). When the
connections cannot all be made (a node's definition changed since), the planner wires the
same nodes by type instead, so an old design still yields a valid chatflow when one exists.
``config`` sets plain inputs: ``{node name or id: {input: value}}``; inputs the node no longer
has are skipped and named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloom.packs.flowise.flowdata import (
    Json,
    check_flow,
    compatible,
    connect,
    new_flow,
    output_options,
    several_outputs,
)
from agentloom.packs.flowise.layout import layout
from agentloom.packs.flowise.planner import PlanError, plan_flow


def build_design(design: Mapping[str, Any], catalog: Mapping[str, Mapping[str, Any]]) -> tuple[Json, list[str]]:
    """(flowData, notes): the chatflow of a design, and what could not be carried over."""
    names = list(design["nodes"])
    unknown = sorted({n for n in names if n not in catalog})
    if unknown:
        raise PlanError(f"design nodes not on this Flowise: {', '.join(unknown)}; build a new design")
    flow = _connected(names, design.get("connections") or [], catalog)
    if flow is None or check_flow(flow, catalog):
        flow = plan_flow(names, catalog)
    notes = _configure(flow, design.get("config") or {})
    return flow, notes


def _connected(names: list[str], connections: list[list[str]], catalog: Mapping[str, Mapping[str, Any]]) -> Json | None:
    flow, _ = new_flow(names, catalog)
    by_id = {n["id"]: n for n in flow["nodes"]}
    for source_ref, target_ref in connections:
        source, target = _resolve(source_ref, flow, by_id), _resolve(target_ref, flow, by_id)
        if source is None or target is None or not _link(flow, by_id[source], by_id[target]):
            return None
    layout(flow)
    return flow


def _resolve(ref: str, flow: Json, by_id: Mapping[str, Json]) -> str | None:
    if ref in by_id:
        return ref
    return next((n["id"] for n in flow["nodes"] if n["data"]["name"] == ref), None)


def _link(flow: Json, source: Json, target: Json) -> bool:
    for option in output_options(source["data"]):
        for anchor in target["data"]["inputAnchors"]:
            if not compatible(option["id"], anchor["id"]):
                continue
            try:
                output = option["name"] if several_outputs(source["data"]) else None
                connect(flow, source["id"], target["id"], anchor["name"], output)
                return True
            except ValueError:
                continue  # taken, or the source already sends another output
    return False


def _configure(flow: Json, config: Mapping[str, Any]) -> list[str]:
    notes = []
    for ref, values in config.items():
        node = next((n for n in flow["nodes"] if n["id"] == ref or n["data"]["name"] == ref), None)
        if node is None or not isinstance(values, Mapping):
            notes.append(f"config {ref}: no such node")
            continue
        params = {p["name"] for p in node["data"]["inputParams"]}
        for key, value in values.items():
            if key in params:
                node["data"]["inputs"][key] = value
            else:
                notes.append(f"config {ref}.{key}: no such setting now")
    return notes
