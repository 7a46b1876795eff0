"""Graphs written to cost the server as much as possible, sent to ``POST /flows/validate`` and
saved, through a running ``agentloom stitch serve`` on SQLite and PostgreSQL: the checks stay
linear in the graph, the replies bounded, the memory given back, and ``/health`` answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.stitch.conftest import StitchServer
from tests.stitch.hostile import assert_clean_log, while_health_is_asked

pytestmark = pytest.mark.slow
REPLY_LIMIT = 64 * 1024


def worker(node_id: str, url: str | None = "http://127.0.0.1:9/hook") -> dict[str, Any]:
    data = {} if url is None else {"webhookUrl": url}
    return {"id": node_id, "type": "Worker", "position": {"x": 0, "y": 0}, "data": data}


def edge(source: str, target: str) -> dict[str, str]:
    return {"id": f"{source}-{target}", "source": source, "target": target}


def ring(size: int) -> dict[str, Any]:
    nodes = [worker(f"n{i}") for i in range(size)]
    return {"nodes": nodes, "edges": [edge(f"n{i}", f"n{(i + 1) % size}") for i in range(size)]}


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_cycle_of_five_thousand_nodes_is_one_problem_and_costs_nothing_after(stitch: StitchServer) -> None:
    assert stitch.proc is not None
    graph = ring(5_000)
    stitch.http.post("/flows/validate", json={"graph": ring(50)})  # the server warmed up: its imports done
    before = rss_kb(stitch.proc.pid)
    checked = while_health_is_asked(stitch, lambda c: c.post("/flows/validate", json={"graph": graph}))
    assert checked.reply.status_code == 200, checked.reply.text
    assert len(checked.reply.content) < REPLY_LIMIT
    (problem,) = checked.reply.json()["problems"]
    assert problem["rule"] == "cycle" and problem["node_id"] == "n0"
    assert "5,000 node(s) through 'n0', 'n1', 'n2', 'n3', 'n4' and 4,995 more" in problem["message"]
    saved = stitch.http.post("/flows", json={"name": "ring", "graph": graph})
    assert saved.status_code == 422 and len(saved.content) < REPLY_LIMIT, saved.text[:500]
    assert rss_kb(stitch.proc.pid) - before < 50 * 1024
    assert_clean_log(stitch)


def test_many_cycles_and_many_broken_nodes_get_a_bounded_reply(stitch: StitchServer) -> None:
    pairs: dict[str, Any] = {"nodes": [], "edges": []}
    for i in range(2_500):  # 2,500 cycles of two nodes
        pairs["nodes"] += [worker(f"a{i}"), worker(f"b{i}")]
        pairs["edges"] += [edge(f"a{i}", f"b{i}"), edge(f"b{i}", f"a{i}")]
    broken = {"nodes": [worker(f"w{i}", None) for i in range(5_000)], "edges": []}
    for graph, rule in ((pairs, "cycle"), (broken, "worker_webhook")):
        reply = stitch.http.post("/flows/validate", json={"graph": graph})
        assert reply.status_code == 200 and len(reply.content) < REPLY_LIMIT, reply.text[:300]
        problems = reply.json()["problems"]
        assert len(problems) == 100 and {p["rule"] for p in problems} == {rule}
        found = 2_500 if rule == "cycle" else 5_000
        assert f"and {found - 99:,} more problem(s)" in problems[-1]["message"]
        saved = stitch.http.post("/flows", json={"name": "broken", "graph": graph})
        assert saved.status_code == 422 and len(saved.json()["detail"]) == 100
    assert_clean_log(stitch)


def test_fan_outs_nest_within_a_bound(stitch: StitchServer) -> None:
    depth = 40
    nodes = [{"id": f"s{i}", "type": "Splitter", "position": {"x": 0, "y": 0}, "data": {}} for i in range(depth)]
    nodes.append(worker("w"))
    nodes += [{"id": f"c{i}", "type": "Collector", "position": {"x": 0, "y": 0}, "data": {}} for i in range(depth)]
    order = [f"s{i}" for i in range(depth)] + ["w"] + [f"c{i}" for i in reversed(range(depth))]
    graph = {"nodes": nodes, "edges": [edge(a, b) for a, b in zip(order, order[1:], strict=False)]}
    reply = stitch.http.post("/flows/validate", json={"graph": graph})
    assert reply.status_code == 200, reply.text
    rules = {p["rule"] for p in reply.json()["problems"]}
    assert rules == {"fan_out_depth"}, reply.json()["problems"][:3]
    assert "at most 16 deep" in reply.json()["problems"][0]["message"]
    assert_clean_log(stitch)
