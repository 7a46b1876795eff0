"""Graph checks and fan-out scopes, without a database."""

from __future__ import annotations

import pytest

from agentloom.stitch.graph import GraphError, analyse, instance_key
from agentloom.stitch.models import Graph
from tests.stitch.graphs import Builder


def plan_of(b: Builder):  # type: ignore[no-untyped-def]
    return analyse(Graph.model_validate(b.graph()))


def test_scopes_follow_splitters_and_collectors() -> None:
    b = Builder()
    b.chain(
        b.node("Worker", "a"),
        b.node("Splitter", "s1"),
        b.node("Worker", "w"),
        b.node("Splitter", "s2"),
        b.node("UX", "u"),
        b.node("Collector", "c2"),
        b.node("Collector", "c1"),
        b.node("Worker", "z"),
    )
    plan = plan_of(b)
    assert plan.scope == {
        "a": (),
        "s1": (),
        "w": ("s1",),
        "s2": ("s1",),
        "u": ("s1", "s2"),
        "c2": ("s1",),
        "c1": (),
        "z": (),
    }
    assert plan.closes == {"c2": "s2", "c1": "s1"}
    assert plan.inside["c1"] == {"w", "s2", "u", "c2"} and plan.inside["c2"] == {"u"}
    assert plan.roots == ["a"]
    assert instance_key("u", (1, 0)) == "u_1_0" and instance_key("a", ()) == "a"


def test_node_ids_that_look_like_path_keys_are_fine_unless_they_clash() -> None:
    b = Builder()
    b.chain(b.node("Splitter", "split_0"), b.node("Worker", "node_1"), b.node("Collector", "node_2"))
    assert plan_of(b).scope["node_1"] == ("split_0",)
    clash = Builder()
    clash.chain(
        clash.node("Splitter", "s"),
        clash.node("Worker", "w"),
        clash.node("Collector", "c"),
        clash.node("Worker", "w_1"),
    )
    with pytest.raises(GraphError, match="'w_1' would clash with the fan-out paths of 'w'"):
        plan_of(clash)


def test_every_problem_is_named() -> None:
    b = Builder()
    s, w1, w2 = b.node("Splitter", "s"), b.node("Worker", "w1"), b.node("Worker", "w2")
    b.edge(s, w1)
    b.edge(w1, w2)
    b.edge(b.node("Worker", "outside"), w2)  # joins a fan-out path with a node outside it
    with pytest.raises(GraphError, match="'w2' joins paths of different fan-outs"):
        plan_of(b)
    bad = {
        "nodes": [
            {"id": "w", "type": "Worker", "data": {"webhookUrl": "ftp://x"}},
            {"id": "w", "type": "UX"},
            {"id": "s", "type": "Splitter", "data": {"arrayPath": 3}},
        ],
        "edges": [{"id": "e", "source": "w", "target": "nope"}, {"id": "e", "source": "s", "target": "w"}],
    }
    with pytest.raises(GraphError) as caught:
        analyse(Graph.model_validate(bad))
    text = str(caught.value)
    for expected in ("webhookUrl", "used twice", "arrayPath", "edge id 'e' is used twice", "missing node 'nope'"):
        assert expected in text
    with pytest.raises(GraphError, match="needs at least one node"):
        analyse(Graph.model_validate({"nodes": []}))
