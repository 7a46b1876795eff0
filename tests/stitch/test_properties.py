"""Random DAGs under random interleavings: duplicates, late callbacks, failures with retries,
and crash points (after commit before dispatch, mid-dispatch). Whatever the order, every
Collector fires exactly once, every (node, attempt) is dispatched once, and the run ends in
the state the graph implies (the same as a calm, in-order execution)."""

from __future__ import annotations

import random
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import events, outbox
from agentloom.stitch.engine import LEASE_SECONDS, Engine, Sending
from agentloom.stitch.execution import Execution, initial_states
from agentloom.stitch.graph import analyse
from agentloom.stitch.models import Graph, NodeType
from tests.stitch.conftest import drop_pg_database, fresh_pg_database
from tests.stitch.graphs import build, programs


def worker_output(key: str, value: Any) -> dict[str, Any]:
    """Deterministic per node instance, so every interleaving must reach the same outputs."""
    return {"items": list(range(zlib.crc32(key.encode()) % 3)), "seen": value if not isinstance(value, dict) else sorted(value)}


def calm_run(graph: dict[str, Any], run_input: Any) -> dict[str, dict[str, Any]]:
    """The reference: events in order, each once, nothing lost."""
    plan = analyse(Graph.model_validate(graph))
    states = initial_states(plan)
    ex = Execution("ref", plan, states, run_input, lambda r, k, a: "", "t")
    ex.start()
    queue = list(ex.dispatches)
    while True:
        waiting = [k for k, s in states.items() if s["status"] == "waiting_for_user"]
        if not queue and not waiting:
            return states
        ex = Execution("ref", plan, states, run_input, lambda r, k, a: "", "t")
        if queue:
            d = queue.pop(0)
            ex.callback(d.key, d.attempt, "completed", worker_output(d.key, d.payload["input"]), None)
        else:
            ex.complete(waiting[0], {"approved": waiting[0]})
        queue.extend(ex.dispatches)


class Chaos:
    """Drives one run through the real engine and database in a random order."""

    def __init__(self, engine: Engine, rng: random.Random) -> None:
        self.engine, self.rng = engine, rng
        self.inflight: list[Sending] = []  # webhooks the worker has, not yet answered
        self.answered: list[tuple[Sending, str]] = []  # for duplicate and late callbacks
        self.clock = time.time()

    def deliver(self, sendings: list[Sending]) -> None:
        for s in sendings:
            roll = self.rng.random()
            if roll < 0.1:
                continue  # crash after commit, before dispatch: only the reconciler can send it
            self.inflight.append(s)
            if roll < 0.2:
                self.inflight.append(s)  # crash mid-dispatch: the worker sees it twice

    def step(self, run_id: str) -> bool:
        run = self.engine.get_run(run_id)
        states = run["node_states"]
        choices = []
        if self.inflight:
            choices += ["callback"] * 4
        if self.answered:
            choices.append("replay")  # duplicates and late callbacks
        if any(s["status"] == "waiting_for_user" for s in states.values()):
            choices.append("complete")
        if any(s["status"] == "failed" for s in states.values()):
            choices.append("retry")
        if self.engine.pending_dispatches():
            choices.append("reconcile")
        if not choices:
            return False
        action = self.rng.choice(choices)
        if action == "callback":
            s = self.inflight.pop(self.rng.randrange(len(self.inflight)))
            status = "failed" if self.rng.random() < 0.15 else "completed"
            output = worker_output(s.key, s.payload["input"]) if status == "completed" else None
            result, more = self.engine.callback(run_id, s.key, s.attempt, status, output, "chaos" if status == "failed" else None)
            assert result.outcome.http_status in (200, 409), result
            self.answered.append((s, status))
            self.engine.mark_sent([s.outbox_id])
            self.deliver(more)
        elif action == "replay":  # a duplicate, or a late callback of an older attempt
            s, status = self.rng.choice(self.answered)
            output = worker_output(s.key, s.payload["input"]) if status == "completed" else None
            result, more = self.engine.callback(run_id, s.key, s.attempt, status, output, "chaos")
            assert result.outcome.http_status in (200, 409), result
            assert not more, "a replayed callback dispatched something"
        elif action == "complete":
            key = self.rng.choice([k for k, s in states.items() if s["status"] == "waiting_for_user"])
            result, more = self.engine.complete(run_id, key, {"approved": key})
            assert result.outcome.http_status == 200
            self.deliver(more)
        elif action == "retry":
            key = self.rng.choice([k for k, s in states.items() if s["status"] == "failed"])
            result, more = self.engine.retry(run_id, key)
            assert result.outcome.http_status == 200, result
            self.deliver(more)
        else:  # the reconciler, after leases ran out
            self.clock += LEASE_SECONDS + 1
            self.deliver(self.engine.claim_due(now=self.clock))
        return True


def finish(chaos: Chaos, run_id: str, steps: int = 80) -> dict[str, Any]:
    for _ in range(steps):
        if not chaos.step(run_id):
            break
    # Then calm: answer everything, complete gates, retry failures, until the run is done.
    engine = chaos.engine
    for _ in range(100):
        chaos.clock += LEASE_SECONDS + 1
        chaos.inflight.extend(engine.claim_due(now=chaos.clock))
        while chaos.inflight:
            s = chaos.inflight.pop()
            _, more = engine.callback(run_id, s.key, s.attempt, "completed", worker_output(s.key, s.payload["input"]), None)
            engine.mark_sent([s.outbox_id])
            chaos.inflight.extend(more)
        run = engine.get_run(run_id)
        settled = True
        for key, state in run["node_states"].items():
            if state["status"] in ("waiting_for_user", "failed"):
                settled = False
                result, more = (engine.complete(run_id, key, {"approved": key}) if state["status"] == "waiting_for_user"
                                else engine.retry(run_id, key))
                chaos.inflight.extend(more)
        if settled and not engine.pending_dispatches():
            return run
    pytest.fail("the run did not finish")


def check(engine: Engine, run_id: str, graph: dict[str, Any], run: dict[str, Any]) -> None:
    plan = analyse(Graph.model_validate(graph))
    expected = calm_run(graph, {"items": [1, 2]})
    got = run["node_states"]
    assert run["status"] == "completed", {k: (s["status"], s.get("error")) for k, s in got.items()}
    for key, state in expected.items():
        if state.get("path") is None:
            continue
        assert got[key]["status"] == state["status"], key
        assert got[key]["output"] == state["output"], key
    assert {k for k, s in got.items() if s.get("path") is not None} == {k for k, s in expected.items() if s.get("path") is not None}
    with engine.db.engine.connect() as conn:
        rows = conn.execute(select(events.c.node_key, events.c.status).where(events.c.run_id == run_id)).all()
        dispatched = conn.execute(select(outbox.c.node_key, outbox.c.attempt).where(outbox.c.run_id == run_id)).all()
    completions = Counter(k for k, s in rows if s == "completed")
    for key, state in got.items():
        if state.get("node_id") and plan.kind(state["node_id"]) is NodeType.COLLECTOR and state["path"] is not None:
            fails = sum(1 for k, s in rows if k == key and s == "failed")
            assert completions[key] == 1, f"Collector {key} completed {completions[key]} times"
            assert fails == 0 or completions[key] == 1
    assert len(dispatched) == len(set(dispatched)), "a node was dispatched twice for one attempt"


def run_chaos(url: str, program: list[Any], seed: int) -> None:
    engine = Engine(Database(url), "http://127.0.0.1:9")
    graph = build(program)
    flow = engine.create_flow("chaos", Graph.model_validate(graph))
    run, sendings = engine.start_run(flow["id"], {"items": [1, 2]})
    chaos = Chaos(engine, random.Random(seed))
    chaos.deliver(sendings)
    check(engine, run["id"], graph, finish(chaos, run["id"]))
    engine.db.dispose()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=programs, seed=st.integers(0, 2**32))
def test_any_interleaving_on_sqlite(tmp_path: Path, program: list[Any], seed: int) -> None:
    db_file = tmp_path / f"chaos-{seed}-{time.monotonic_ns()}.db"
    run_chaos(f"sqlite:///{db_file}", program, seed)


def test_any_interleaving_on_postgresql(postgres: str) -> None:
    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(program=programs, seed=st.integers(0, 2**32))
    def inner(program: list[Any], seed: int) -> None:
        url = fresh_pg_database(postgres)
        try:
            run_chaos(url, program, seed)
        finally:
            drop_pg_database(postgres, url)

    inner()
