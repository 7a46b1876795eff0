"""Place chatflow nodes on the canvas: left to right by connection depth, never overlapping.

A node's column is its depth: the longest path from it to the ending node, counted from the right,
so every edge runs left to right and the ending node stands alone in the last column (as in the
marketplace templates). Columns are ``COLUMN_PITCH`` apart, more than the 300 px node width. In a
column, nodes are stacked in the order of the nodes they feed (then of those nodes' inputs, so a
chain's model sits above its memory), each as close to its first target's height as the nodes
above it allow, with ``ROW_GAP`` between one node's bottom and the next one's top. Heights are the
nodes' own ``height`` (``flowdata.estimate_height`` for planned nodes), so nothing overlaps.

``resolve_overlaps`` is for flows edited in place (a node swapped for a taller one): it moves only
the nodes that overlap, downwards, and leaves the rest of a template's layout alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloom.packs.flowise.flowdata import Json, overlaps

COLUMN_PITCH = 400
ROW_GAP = 80  # the estimate of a node's height is within about 25 px; the smallest row pitch is 142 + 80
ORIGIN = 100


def _height(node: Mapping[str, Any]) -> float:
    return float(node.get("height") or 0)


def _set_position(node: Json, x: float, y: float) -> None:
    node["position"] = {"x": x, "y": y}
    node["positionAbsolute"] = {"x": x, "y": y}


def depths(flow: Mapping[str, Any]) -> dict[str, int]:
    """Longest path (in edges) from each node to a node without outgoing edges; cycles are cut."""
    out: dict[str, list[str]] = {}
    for edge in flow["edges"]:
        out.setdefault(edge["source"], []).append(edge["target"])
    found: dict[str, int] = {}

    def depth(node: str, path: frozenset[str]) -> int:
        if node not in found:
            nxt = [t for t in out.get(node, []) if t not in path]
            found[node] = 1 + max((depth(t, path | {node}) for t in nxt), default=-1)
        return found[node]

    for node in flow["nodes"]:
        depth(node["id"], frozenset())
    return found


def layout(flow: Json) -> None:
    """Set every node's position (and ``positionAbsolute``) in place."""
    nodes = {n["id"]: n for n in flow["nodes"]}
    order = {node_id: k for k, node_id in enumerate(nodes)}
    level = depths(flow)
    deepest = max(level.values(), default=0)
    targets: dict[str, list[tuple[str, str]]] = {}
    for edge in flow["edges"]:
        targets.setdefault(edge["source"], []).append((edge["target"], edge["targetHandle"]))

    def handle_rank(target: str, handle: str) -> int:
        data = nodes[target]["data"]
        ids = [a.get("id") for a in (data.get("inputAnchors") or []) + (data.get("inputParams") or [])]
        return ids.index(handle) if handle in ids else len(ids)

    for column in range(deepest, -1, -1):
        members = [i for i in nodes if level[i] == column]

        def key(node_id: str) -> tuple[float, int, int]:
            feeds = targets.get(node_id, [])
            if not feeds:
                return (0.0, 0, order[node_id])
            target, handle = min(feeds, key=lambda t: (nodes[t[0]]["position"]["y"], handle_rank(*t)))
            return (nodes[target]["position"]["y"], handle_rank(target, handle), order[node_id])

        members.sort(key=key)
        x = ORIGIN + (deepest - column) * COLUMN_PITCH
        bottom = float("-inf")
        for node_id in members:
            y = max(key(node_id)[0], bottom)
            _set_position(nodes[node_id], x, y)
            bottom = y + _height(nodes[node_id]) + ROW_GAP
    shift = ORIGIN - min((n["position"]["y"] for n in nodes.values()), default=ORIGIN)
    for node in nodes.values():
        _set_position(node, node["position"]["x"], node["position"]["y"] + shift)


def resolve_overlaps(flow: Json, priority: Mapping[str, int] | None = None, gap: float = ROW_GAP) -> list[str]:
    """Move overlapping nodes down until none overlaps; returns the moved ids.

    Nodes are settled in order of ``priority`` (default 0; lower first), then from the top: a node
    overlapping one settled before it moves below it. So a swapped-in taller node (priority -1)
    pushes its neighbours down, and an added node (priority 1) is the one that moves.
    """
    rank = priority or {}
    placed: list[Json] = []
    moved: list[str] = []
    for node in sorted(flow["nodes"], key=lambda n: (rank.get(n["id"], 0), n["position"]["y"], n["position"]["x"])):
        y0 = node["position"]["y"]
        while clash := [p for p in placed if overlaps(node, p)]:
            _set_position(node, node["position"]["x"], max(p["position"]["y"] + _height(p) for p in clash) + gap)
        if node["position"]["y"] != y0:
            moved.append(node["id"])
        placed.append(node)
    return moved
