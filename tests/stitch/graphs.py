"""Graph builders for the tests: hand-written shapes and random valid DAGs for property tests."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

WEBHOOK = "http://127.0.0.1:9/work"


class Builder:
    def __init__(self, webhook: str = WEBHOOK) -> None:
        self.webhook = webhook
        self.nodes: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        self._ids = itertools.count()

    def node(self, type_: str, node_id: str | None = None, **data: Any) -> str:
        node_id = node_id or f"{type_.lower()}{next(self._ids)}"
        if type_ == "Worker":
            data.setdefault("webhookUrl", self.webhook)
        if type_ == "Splitter":
            data.setdefault("arrayPath", "items")
        self.nodes.append({"id": node_id, "type": type_, "position": {"x": 0, "y": 0}, "data": data})
        return node_id

    def edge(self, source: str, target: str) -> None:
        self.edges.append({"id": f"e{len(self.edges)}", "source": source, "target": target})

    def chain(self, *ids: str) -> None:
        for a, b in itertools.pairwise(ids):
            self.edge(a, b)

    def graph(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "edges": self.edges}


# A random program: a sequence of blocks; each block is a Worker, a UX gate, a fan-out
# (Worker -> Splitter -> inner program -> Collector) or parallel branches joined by a Worker.
Block = Any
blocks: st.SearchStrategy[Block] = st.recursive(
    st.sampled_from(["Worker", "UX"]),
    lambda inner: st.one_of(
        st.tuples(st.just("fanout"), st.lists(inner, min_size=1, max_size=3)),
        st.tuples(st.just("parallel"), st.lists(st.lists(inner, min_size=1, max_size=2), min_size=2, max_size=3)),
    ),
    max_leaves=8,
)
programs = st.lists(blocks, min_size=1, max_size=4)


def build(program: list[Block], webhook: str = WEBHOOK) -> dict[str, Any]:
    b = Builder(webhook)
    start = b.node("Worker")
    _sequence(b, program, start)
    return b.graph()


def _sequence(b: Builder, program: list[Block], previous: str) -> str:
    for block in program:
        previous = _block(b, block, previous)
    return previous


def _block(b: Builder, block: Block, previous: str) -> str:
    if isinstance(block, str):
        node = b.node(block)
        b.edge(previous, node)
        return node
    kind, body = block
    if kind == "fanout":
        feeder, splitter = b.node("Worker"), b.node("Splitter")
        b.chain(previous, feeder, splitter)
        last = _sequence(b, body, splitter)
        collector = b.node("Collector")
        b.edge(last, collector)
        return collector
    join = b.node("Worker")
    for branch in body:
        b.edge(_sequence(b, branch, previous), join)
    return join
