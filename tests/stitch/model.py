"""An independent model of what a Stitch run computes, written from the rules alone.

It imports nothing from ``agentloom.stitch``: the property tests compare the engine against it,
so a bug in the engine's own logic cannot hide on both sides of the comparison. It reads the
graph as the JSON a client posts and applies the seed's rules (004) and this project's
documented additions:

- a root node receives the run's input; a node with one upstream receives that node's output;
  with several, object outputs are merged key by key in edge order (a later edge wins) and any
  other output sits under its upstream's id (README, "Stitch");
- a Splitter's output is the array at its ``data.arrayPath``; each node after it runs once per
  element, on its own path, keyed ``node_0``, ``node_1`` (``node_0_1`` when nested), until the
  Collector that closes the Splitter, whose output is the list of what each path delivered to it,
  in the array's order;
- a Worker is sent one webhook per attempt; a UX gate waits for a person (here: ``{"approved":
  key}``); when every failure is retried and every gate completed, the run completes.

:func:`run` gives, for a run where every attempt eventually succeeds, each node instance's
output and the number of Worker webhooks a run without failures sends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Worker = Callable[[str, Any], Any]  # (instance key, input) -> output


@dataclass(frozen=True)
class Outcome:
    outputs: dict[str, Any]  # instance key -> output, for every node instance that ran
    webhooks: int  # Worker instances: one webhook each when nothing fails


def key_of(node_id: str, path: tuple[int, ...]) -> str:
    return node_id + "".join(f"_{i}" for i in path)


def run(graph: Mapping[str, Any], run_input: Any, worker: Worker) -> Outcome:
    nodes = {n["id"]: n for n in graph["nodes"]}
    upstream: dict[str, list[str]] = {n: [] for n in nodes}
    for edge in graph.get("edges", []):
        if edge["source"] not in upstream[edge["target"]]:
            upstream[edge["target"]].append(edge["source"])
    order = _topological(nodes, upstream)
    kind = {n: nodes[n]["type"] for n in nodes}
    # The Splitters whose paths a node runs on (innermost last); the one a Collector closes.
    scope: dict[str, tuple[str, ...]] = {}
    closes: dict[str, str] = {}
    for n in order:
        incoming: tuple[str, ...] = ()
        for u in upstream[n]:
            incoming = scope[u] + ((u,) if kind[u] == "Splitter" else ())
        if kind[n] == "Collector":
            closes[n], incoming = incoming[-1], incoming[:-1]
        scope[n] = incoming

    outputs: dict[str, Any] = {}

    def paths(node_id: str) -> list[tuple[int, ...]]:
        """Every path ``node_id`` runs on: one per element of each Splitter over it."""
        found: list[tuple[int, ...]] = [()]
        for splitter in scope[node_id]:
            found = [(*p, i) for p in found for i in range(len(outputs.get(key_of(splitter, p), [])))]
        return found

    def received(node_id: str, path: tuple[int, ...]) -> Any:
        if not upstream[node_id]:
            return run_input
        parts = []
        for u in upstream[node_id]:
            if kind[u] == "Splitter":
                parts.append((u, outputs[key_of(u, path[:-1])][path[-1]]))
            else:
                parts.append((u, outputs[key_of(u, path[: len(scope[u])])]))
        if len(parts) == 1:
            return parts[0][1]
        merged: dict[str, Any] = {}
        for source, value in parts:
            if isinstance(value, dict):
                merged.update(value)
            else:
                merged[source] = value
        return merged

    webhooks = 0
    for n in order:
        for path in paths(n):
            key = key_of(n, path)
            if kind[n] == "Collector":
                count = len(outputs[key_of(closes[n], path)])
                outputs[key] = [received(n, (*path, i)) for i in range(count)]
                continue
            value = received(n, path)
            if kind[n] == "Worker":
                webhooks += 1
                outputs[key] = worker(key, value)
            elif kind[n] == "UX":
                outputs[key] = {"approved": key}
            else:  # Splitter
                outputs[key] = _array(value, nodes[n].get("data", {}).get("arrayPath"))
    return Outcome(outputs, webhooks)


def _array(value: Any, array_path: str | None) -> list[Any]:
    for part in array_path.split(".") if array_path else []:
        value = value[int(part)] if isinstance(value, list) else value[part]
    assert isinstance(value, list), f"the model's graphs split arrays, got {value!r}"
    return value


def _topological(nodes: Mapping[str, Any], upstream: Mapping[str, list[str]]) -> list[str]:
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(nodes):
        ready = [n for n in nodes if n not in placed and all(u in placed for u in upstream[n])]
        assert ready, "the model runs acyclic graphs only"
        order += ready
        placed.update(ready)
    return order
