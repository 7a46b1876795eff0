"""Random DAGs under random interleavings: duplicates, late callbacks, failures with retries,
crash points (after commit before dispatch, mid-dispatch), deadlines passing, automatic
retries (some Workers carry a retry policy) and cancels. Whatever the order, every Collector
fires exactly once, every (node, attempt) is dispatched once and has one history row, and
the run ends in the state the graph implies or, cancelled, with nothing left to send or fire and
nothing sent after the cancel. What the graph implies comes from ``tests/stitch/model.py``, a
model written from the rules that imports nothing of the engine: every node instance's output,
each Collector's order, and the webhooks of a run without failures."""

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
from agentloom.stitch.db.schema import attempts, events, outbox, timers
from agentloom.stitch.engine import LEASE_SECONDS, Engine, Sending
from agentloom.stitch.execution import Outcome
from agentloom.stitch.flows import Flows
from agentloom.stitch.models import Graph
from agentloom.stitch.queries import get_run
from tests.conftest import examples
from tests.stitch import model
from tests.stitch.conftest import drop_pg_database, fresh_pg_database
from tests.stitch.graphs import build, programs

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def worker_output(key: str, value: Any) -> dict[str, Any]:
    """Deterministic per node instance, so every interleaving must reach the same outputs."""
    return {
        "items": list(range(zlib.crc32(key.encode()) % 3)),
        "seen": value if not isinstance(value, dict) else sorted(value),
    }


NODE_TIMEOUT = 60.0  # every Worker has a deadline (the engine's default)
POLICY = {"maxAttempts": 2, "backoffSeconds": 5}  # given to some Workers


class Chaos:
    """Drives one run through the real engine and database in a random order, on its clock."""

    def __init__(self, engine: Engine, rng: random.Random, may_cancel: bool = False) -> None:
        self.engine, self.rng = engine, rng
        self.inflight: list[Sending] = []  # webhooks the worker has, not yet answered
        self.answered: list[tuple[Sending, str]] = []  # for duplicate and late callbacks
        self.clock = time.time()
        self.may_cancel = may_cancel
        self.cancelled_with: int | None = None  # outbox rows when the run was cancelled

    def now(self) -> float:
        return self.clock

    def deliver(self, sendings: list[Sending]) -> None:
        for s in sendings:
            roll = self.rng.random()
            if roll < 0.1:
                continue  # crash after commit, before dispatch: only the reconciler can send it
            self.inflight.append(s)
            if roll < 0.2:
                self.inflight.append(s)  # crash mid-dispatch: the worker sees it twice

    def step(self, run_id: str) -> bool:
        run = get_run(self.engine.db, run_id)
        states = run["node_states"]
        choices = []
        if self.inflight:
            choices += ["callback"] * 3 + ["batch"]  # a batch: callbacks that arrived together, one commit
        if self.answered:
            choices.append("replay")  # duplicates and late callbacks
        if any(s["status"] == "waiting_for_user" for s in states.values()):
            choices.append("complete")
        if any(s["status"] == "failed" for s in states.values()):
            choices.append("retry")
        if self.engine.pending_dispatches():
            choices.append("reconcile")
        choices.append("time")  # deadlines pass, automatic retries come due
        if self.may_cancel and self.cancelled_with is None:
            choices.append("cancel")
        if not choices:
            return False
        action = self.rng.choice(choices)
        if action == "callback":
            s = self.inflight.pop(self.rng.randrange(len(self.inflight)))
            status = "failed" if self.rng.random() < 0.15 else "completed"
            output = worker_output(s.key, s.payload["input"]) if status == "completed" else None
            result, more = self.engine.callback(
                run_id, s.key, s.attempt, status, output, "chaos" if status == "failed" else None
            )
            assert result.outcome.http_status in (200, 409), result
            assert not (self.cancelled_with is not None and result.outcome is Outcome.APPLIED), (
                "a cancelled node took a callback"
            )
            self.answered.append((s, status))
            self.engine.mark_sent([(s, 200)])
            self.deliver(more)
        elif action == "batch":  # several callbacks, duplicates and replays among them, in one transaction
            picked = [
                self.inflight.pop(self.rng.randrange(len(self.inflight)))
                for _ in range(min(len(self.inflight), self.rng.randint(1, 4)))
            ]
            if self.answered and self.rng.random() < 0.5:
                picked.insert(self.rng.randrange(len(picked) + 1), self.rng.choice(self.answered)[0])
            calls = [
                (
                    run_id,
                    s.key,
                    s.attempt,
                    status,
                    worker_output(s.key, s.payload["input"]) if status == "completed" else None,
                    "chaos" if status == "failed" else None,
                )
                for s in picked
                for status in ["failed" if self.rng.random() < 0.15 else "completed"]
            ]
            for s, call, (result, more) in zip(picked, calls, self.engine.callbacks(calls), strict=True):
                assert result.outcome.http_status in (200, 409), result
                assert not (self.cancelled_with is not None and result.outcome is Outcome.APPLIED), (
                    "a cancelled node took a callback"
                )
                if result.outcome is not Outcome.APPLIED:
                    assert not more, "a refused or repeated callback dispatched something"
                self.answered.append((s, call[3]))
                self.engine.mark_sent([(s, 200)])
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
            if self.cancelled_with is not None:
                assert result.outcome is Outcome.CONFLICT and not more, result
            else:
                assert result.outcome.http_status == 200, result
            self.deliver(more)
        elif action == "time":
            self.clock += self.rng.uniform(0, NODE_TIMEOUT * 1.2)
            more = self.engine.fire_due()
            assert not (more and self.cancelled_with is not None), "a cancelled run dispatched on a timer"
            self.deliver(more)
        elif action == "cancel":
            before = len(outbox_rows(self.engine, run_id))
            result, more = self.engine.cancel_run(run_id)
            if run["status"] not in ("running", "waiting_for_user"):  # finished: refused, naming its status
                assert result.outcome is Outcome.CONFLICT and f"is {run['status']}" in result.message, result
                return True
            assert result.outcome is Outcome.APPLIED and not more, result
            self.cancelled_with = before
            again, _ = self.engine.cancel_run(run_id)
            assert again.outcome is Outcome.DUPLICATE
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
        chaos.inflight.extend(engine.fire_due())
        while chaos.inflight:
            s = chaos.inflight.pop()
            _, more = engine.callback(
                run_id, s.key, s.attempt, "completed", worker_output(s.key, s.payload["input"]), None
            )
            engine.mark_sent([(s, 200)])
            chaos.inflight.extend(more)
        run = get_run(engine.db, run_id)
        settled = not any(s["status"] == "retrying" for s in run["node_states"].values())
        for key, state in run["node_states"].items():
            if state["status"] in ("waiting_for_user", "failed"):
                settled = False
                result, more = (
                    engine.complete(run_id, key, {"approved": key})
                    if state["status"] == "waiting_for_user"
                    else engine.retry(run_id, key)
                )
                chaos.inflight.extend(more)
        if settled and not engine.pending_dispatches():
            return run
    pytest.fail("the run did not finish")


RUN_INPUT = {"items": [1, 2]}


def check_outputs(run: dict[str, Any], graph: dict[str, Any]) -> model.Outcome:
    """The run completed, with exactly the model's node instances and outputs (Collectors' order included)."""
    expected = model.run(graph, RUN_INPUT, worker_output)
    got = {k: s for k, s in run["node_states"].items() if s.get("path") is not None}  # not fan-out templates
    assert run["status"] == "completed", {k: (s["status"], s.get("error")) for k, s in got.items()}
    assert set(got) == set(expected.outputs)
    for key, state in got.items():
        assert state["status"] == "completed", key
        assert state["output"] == expected.outputs[key], key
    return expected


def check(engine: Engine, run_id: str, graph: dict[str, Any], run: dict[str, Any]) -> None:
    check_outputs(run, graph)
    got = run["node_states"]
    with engine.db.engine.connect() as conn:
        rows = conn.execute(select(events.c.node_key, events.c.status).where(events.c.run_id == run_id)).all()
        dispatched = conn.execute(select(outbox.c.node_key, outbox.c.attempt).where(outbox.c.run_id == run_id)).all()
    completions = Counter(k for k, s in rows if s == "completed")
    for key, state in got.items():
        if state.get("path") is not None:  # exactly once (a Collector too), whatever was replayed or retried
            assert completions[key] == 1, f"{key} completed {completions[key]} times"
    assert len(dispatched) == len(set(dispatched)), "a node was dispatched twice for one attempt"
    check_history(engine, run_id)
    assert not timer_rows(engine, run_id), "a finished run left timers behind"
    assert all(
        a["status"] in ("completed", "failed", "cancelled") and a["finished_at"] for a in attempt_rows(engine, run_id)
    )


def outbox_rows(engine: Engine, run_id: str) -> list[Any]:
    with engine.db.reading() as conn:
        return list(conn.execute(select(outbox).where(outbox.c.run_id == run_id)).mappings())


def attempt_rows(engine: Engine, run_id: str) -> list[Any]:
    with engine.db.reading() as conn:
        return list(conn.execute(select(attempts).where(attempts.c.run_id == run_id)).mappings())


def timer_rows(engine: Engine, run_id: str) -> list[Any]:
    with engine.db.reading() as conn:
        return list(conn.execute(select(timers).where(timers.c.run_id == run_id)).mappings())


def check_history(engine: Engine, run_id: str) -> None:
    """One history row per attempt, and one for every dispatch (numbered 1, 2, ... per node path)."""
    history = [(a["node_key"], a["attempt"]) for a in attempt_rows(engine, run_id)]
    assert len(history) == len(set(history)), "an attempt has two history rows"
    dispatched = {(r["node_key"], r["attempt"]) for r in outbox_rows(engine, run_id)}
    assert dispatched <= set(history), f"dispatches without history: {dispatched - set(history)}"
    per_key: dict[str, list[int]] = {}
    for key, attempt in history:
        per_key.setdefault(key, []).append(attempt)
    for key, numbers in per_key.items():
        assert sorted(numbers) == list(range(1, len(numbers) + 1)), (key, numbers)


def check_cancelled(chaos: Chaos, run_id: str) -> None:
    engine = chaos.engine
    # Whatever still arrives for it (callbacks of webhooks in flight, timers, the reconciler) changes nothing.
    chaos.clock += LEASE_SECONDS + NODE_TIMEOUT * 2
    assert engine.claim_due(now=chaos.clock) == [] and engine.fire_due() == []
    for s in chaos.inflight:
        result, more = engine.callback(
            run_id, s.key, s.attempt, "completed", worker_output(s.key, s.payload["input"]), None
        )
        assert result.outcome in (Outcome.CONFLICT, Outcome.DUPLICATE) and not more, result
    run = get_run(engine.db, run_id)
    assert run["status"] == "cancelled"
    assert not any(
        s["status"] in ("running", "waiting_for_user", "retrying", "pending") for s in run["node_states"].values()
    )
    rows = outbox_rows(engine, run_id)
    assert len(rows) == chaos.cancelled_with, "something was dispatched after the cancel"
    assert "pending" not in {r["state"] for r in rows} and not timer_rows(engine, run_id)
    check_history(engine, run_id)


def run_chaos(url: str, program: list[Any], seed: int) -> None:
    rng = random.Random(seed)
    clock: list[Chaos] = []
    engine = Engine(Database(url), "http://127.0.0.1:9", node_timeout=NODE_TIMEOUT, clock=lambda: clock[0].now())
    graph = build(program)
    for node in graph["nodes"]:
        if node["type"] == "Worker" and rng.random() < 0.5:
            node["data"]["retry"] = POLICY
    flow = Flows(engine.db).create("chaos", Graph.model_validate(graph))
    chaos = Chaos(engine, rng, may_cancel=rng.random() < 0.3)
    clock.append(chaos)
    run, sendings = engine.start_run(flow["id"], RUN_INPUT)
    chaos.deliver(sendings)
    for _ in range(80):
        if not chaos.step(run["id"]) or (chaos.cancelled_with is not None and rng.random() < 0.1):
            break
    if chaos.cancelled_with is not None:
        check_cancelled(chaos, run["id"])
    else:
        check(engine, run["id"], graph, finish(chaos, run["id"], steps=0))
    engine.db.dispose()


def run_calm(url: str, program: list[Any]) -> None:
    """No failures, webhooks answered in order: one webhook per Worker instance, as the model counts."""
    engine = Engine(Database(url), "http://127.0.0.1:9")
    graph = build(program)
    flow = Flows(engine.db).create("calm", Graph.model_validate(graph))
    run, queue = engine.start_run(flow["id"], RUN_INPUT)
    run_id = run["id"]
    while True:
        if queue:
            s = queue.pop(0)
            result, more = engine.callback(
                run_id, s.key, s.attempt, "completed", worker_output(s.key, s.payload["input"]), None
            )
            assert result.outcome is Outcome.APPLIED, result
            queue += more
            continue
        gates = [k for k, v in get_run(engine.db, run_id)["node_states"].items() if v["status"] == "waiting_for_user"]
        if not gates:
            break
        result, more = engine.complete(run_id, gates[0], {"approved": gates[0]})
        queue += more
    expected = check_outputs(get_run(engine.db, run_id), graph)
    assert len(outbox_rows(engine, run_id)) == expected.webhooks
    engine.db.dispose()


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=programs)
def test_a_calm_run_matches_the_model(tmp_path: Path, program: list[Any]) -> None:
    run_calm(f"sqlite:///{tmp_path / f'calm-{time.monotonic_ns()}.db'}", program)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=programs, seed=st.integers(0, 2**32))
def test_any_interleaving_on_sqlite(tmp_path: Path, program: list[Any], seed: int) -> None:
    db_file = tmp_path / f"chaos-{seed}-{time.monotonic_ns()}.db"
    run_chaos(f"sqlite:///{db_file}", program, seed)


def test_any_interleaving_on_postgresql(postgres: str) -> None:
    @settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(program=programs, seed=st.integers(0, 2**32))
    def inner(program: list[Any], seed: int) -> None:
        url = fresh_pg_database(postgres)
        try:
            run_chaos(url, program, seed)
        finally:
            drop_pg_database(postgres, url)

    inner()
