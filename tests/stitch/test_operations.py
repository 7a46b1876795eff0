"""Operating runs: attempt history, deadlines, the retry policy, cancel, fan-out templates and
the upgrade of a version-1 database, on SQLite and PostgreSQL with the real HTTP worker.

The server (a real process) takes the callbacks and sends the webhooks they lead to. Time is
moved, not slept: the test's own engine, on the same database with an injected clock, fires
the timers (deadlines, automatic retries) as a server's reconciler would once they are due.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, insert, inspect, select, text

from agentloom.stitch.db import Database, normalise_url, schema
from agentloom.stitch.db.hot import HotPath
from agentloom.stitch.db.migrations import STEPS
from agentloom.stitch.db.schema import attempts, events, outbox, timers
from agentloom.stitch.engine import Engine, Sending
from agentloom.stitch.execution import Outcome, initial_states, template_summary
from agentloom.stitch.flows import Flows
from agentloom.stitch.graph import GraphError, analyse
from agentloom.stitch.models import Graph
from agentloom.stitch.queries import get_run, waiting
from agentloom.stitch.state import NodeState, node_states
from agentloom.stitch.webhooks import WebhookPolicy
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(stitch: StitchServer, clock: Clock) -> Iterator[Engine]:
    """An engine on the server's database whose callback URLs lead to the server."""
    made = Engine(Database(stitch.database_url), stitch.base, clock=clock)
    yield made
    made.db.dispose()


def start(stitch: StitchServer, graph: dict[str, Any], run_input: Any) -> str:
    flow = stitch.http.post("/flows", json={"name": "ops", "graph": graph})
    assert flow.status_code == 201, flow.text
    run = stitch.http.post(f"/flows/{flow.json()['id']}/runs", json={"input": run_input})
    assert run.status_code == 201, run.text
    return str(run.json()["id"])


def send(engine: Engine, sendings: list[Sending]) -> None:
    """What a dispatcher does with the webhooks an event returned."""
    answered = [(s, httpx.post(s.url, json=s.payload, timeout=10).status_code) for s in sendings]
    engine.mark_sent(answered)


def rows(engine: Engine, table: Any, run_id: str, *where: Any) -> list[Any]:
    with engine.db.reading() as conn:
        return list(conn.execute(select(table).where(table.c.run_id == run_id, *where).order_by(table.c.id)).mappings())


def history(engine: Engine, run_id: str, key: str) -> list[Any]:
    return rows(engine, attempts, run_id, attempts.c.node_key == key)


def wait_until(check: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


@pytest.mark.slow
def test_the_retry_policy_backs_off_gives_up_and_a_manual_retry_starts_a_new_budget(
    stitch: StitchServer, engine: Engine, clock: Clock, worker: Worker
) -> None:
    b = Builder(worker.url)
    b.node("Worker", "w", mode="fail", retry={"maxAttempts": 3, "backoffSeconds": 10, "backoffFactor": 3})
    before = time.time()
    run_id = start(stitch, b.graph(), {"n": 1})

    def retry_timer() -> Any:
        found = rows(engine, timers, run_id, timers.c.kind == "retry")
        return found[0] if found else None

    expected_waits = [10, 30]  # backoffSeconds * backoffFactor ** (n - 1)
    for attempt, wait in enumerate(expected_waits, start=1):
        timer = wait_until(retry_timer)
        after = time.time()
        assert (timer["node_key"], timer["attempt"]) == ("w", attempt)
        assert before + wait <= timer["due_at"] <= after + wait
        run = stitch.http.get(f"/runs/{run_id}").json()
        assert run["status"] == "running" and run["node_states"]["w"]["status"] == "retrying"
        clock.now = timer["due_at"] - 0.5
        assert engine.fire_due() == []  # not due yet
        clock.now = timer["due_at"]
        before = time.time()
        sendings = engine.fire_due()
        assert [(s.key, s.attempt) for s in sendings] == [("w", attempt + 1)]
        assert sendings[0].payload["callbackUrl"] != worker.received[-1]["callbackUrl"]  # a token of its own
        send(engine, sendings)
    run = stitch.wait_for(run_id, ("failed",))  # the third failure: the policy gives up
    assert run["node_states"]["w"]["attempt"] == 3 and not rows(engine, timers, run_id)
    assert [(a["attempt"], a["status"], a["error"]) for a in history(engine, run_id, "w")] == [
        (n, "failed", "the worker was told to fail") for n in (1, 2, 3)
    ]
    assert [a["worker_status"] for a in history(engine, run_id, "w")][1:] == [200, 200]  # the two the test sent

    before = time.time()
    retried = stitch.http.post(f"/retry/{run_id}/w")
    assert retried.status_code == 200, retried.text
    timer = wait_until(retry_timer)  # a new budget: the first wait again
    assert timer["attempt"] == 4 and before + 10 <= timer["due_at"] <= time.time() + 10
    assert stitch.http.get(f"/runs/{run_id}").json()["status"] == "running"
    assert [(w["nodeId"], w["input"]) for w in worker.received] == [("w", {"n": 1})] * 4


@pytest.mark.slow
def test_history_keeps_every_attempt_across_automatic_and_manual_retries(
    stitch: StitchServer, engine: Engine, clock: Clock, worker: Worker
) -> None:
    b = Builder(worker.url)
    # A long backoff: the server's own reconciler (on the real clock) must leave the timer to this test's clock.
    b.chain(
        b.node("Worker", "a", mode="flaky", retry={"maxAttempts": 2, "backoffSeconds": 1000}),
        b.node("Worker", "b", failOn={"items": [3]}),
    )
    run_id = start(stitch, b.graph(), {"items": [3]})
    clock.now = wait_until(lambda: rows(engine, timers, run_id))[0]["due_at"]
    send(engine, engine.fire_due())
    run = stitch.wait_for(run_id)
    assert run["status"] == "failed" and run["node_states"]["a"]["status"] == "completed"
    assert stitch.http.post(f"/retry/{run_id}/b").status_code == 200
    stitch.wait_for(run_id)

    a = history(engine, run_id, "a")
    assert [(x["attempt"], x["status"], x["input"], x["output"]) for x in a] == [
        (1, "failed", {"items": [3]}, {"items": [3]}),
        (2, "completed", {"items": [3]}, {"items": [3]}),
    ]
    assert a[0]["error"] == "the worker was told to fail" and a[1]["error"] is None
    assert all(x["finished_at"] >= x["started_at"] for x in a)
    assert [(x["attempt"], x["status"]) for x in history(engine, run_id, "b")] == [(1, "failed"), (2, "failed")]
    logged = rows(engine, events, run_id, events.c.node_key == "a")
    assert [(e["status"], e["attempt"]) for e in logged] == [
        ("running", 1),
        ("retrying", 1),
        ("running", 2),
        ("completed", 2),
    ]
    assert logged[1]["error"] == "the worker was told to fail" and logged[3]["summary"] == '{"items":[3]}'


@pytest.mark.slow
def test_events_keep_bounded_errors_and_summaries(stitch: StitchServer, engine: Engine, worker: Worker) -> None:
    b = Builder(worker.url)
    b.node("Worker", "w")
    run_id = start(stitch, b.graph(), {"text": "x" * 5000})
    stitch.wait_for(run_id)
    done = rows(engine, events, run_id, events.c.status == "completed")[0]
    assert (
        done["summary"].startswith('{"text":"xxx') and len(done["summary"]) == 200 and done["summary"].endswith("...")
    )
    answer = httpx.post(worker.received[0]["callbackUrl"], json={"status": "failed", "error": "e" * 5000})
    assert answer.status_code == 409  # completed already
    b2 = Builder(worker.url)
    b2.node("Worker", "w", mode="never")
    other = start(stitch, b2.graph(), 1)
    wait_until(lambda: len(worker.received) == 2)
    assert (
        httpx.post(worker.received[1]["callbackUrl"], json={"status": "failed", "error": "e" * 5000}).status_code == 200
    )
    failed = rows(engine, events, other, events.c.status == "failed")[0]
    assert failed["error"] == "e" * 500
    assert history(engine, other, "w")[0]["error"] == "e" * 5000  # the history keeps all of it


@pytest.mark.slow
def test_a_worker_that_misses_its_deadline_times_out_and_its_late_callback_gets_409(
    stitch: StitchServer, engine: Engine, clock: Clock, worker: Worker
) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "slow", mode="late", delay=1.5, timeoutSeconds=5), b.node("Worker", "next"))
    before = time.time()
    run_id = start(stitch, b.graph(), 1)
    timer = wait_until(lambda: rows(engine, timers, run_id))[0]
    assert (timer["node_key"], timer["attempt"], timer["kind"]) == ("slow", 1, "timeout")
    assert before + 5 <= timer["due_at"] <= time.time() + 5  # the node's 5 s, from when it was sent
    clock.now = timer["due_at"]
    assert engine.fire_due() == []
    run = stitch.http.get(f"/runs/{run_id}").json()
    assert run["status"] == "failed"
    assert run["node_states"]["slow"]["error"] == "timeout: no callback within 5 s (attempt 1)"
    assert wait_until(lambda: worker.answers) == [("slow", 1, 409)]  # the slow worker's answer, too late
    assert worker.keys() == ["slow"] and not rows(engine, timers, run_id)
    assert [(a["status"], a["error"]) for a in history(engine, run_id, "slow")] == [
        ("failed", run["node_states"]["slow"]["error"])
    ]

    # In time, the deadline is dropped with the callback: nothing fires later.
    b2 = Builder(worker.url)
    b2.node("Worker", "quick", timeoutSeconds=5)
    quick = start(stitch, b2.graph(), 2)
    assert stitch.wait_for(quick)["status"] == "completed"
    assert not rows(engine, timers, quick)


@pytest.mark.slow
def test_a_timeout_goes_through_the_retry_policy(
    stitch: StitchServer, engine: Engine, clock: Clock, worker: Worker
) -> None:
    b = Builder(worker.url)
    # Long enough that the server's own reconciler (on the real clock) never fires these timers
    # before this test does on its clock, however slow the machine is.
    b.node("Worker", "w", mode="never", timeoutSeconds=30, retry={"maxAttempts": 2, "backoffSeconds": 60})
    run_id = start(stitch, b.graph(), 1)
    clock.now = wait_until(lambda: rows(engine, timers, run_id))[0]["due_at"]
    assert engine.fire_due() == []
    (retry,) = rows(engine, timers, run_id)
    assert retry["kind"] == "retry" and retry["due_at"] == pytest.approx(clock.now + 60)
    clock.now += 60
    sendings = engine.fire_due()
    assert [(s.key, s.attempt) for s in sendings] == [("w", 2)]
    send(engine, sendings)
    (deadline,) = rows(engine, timers, run_id)
    assert (deadline["kind"], deadline["attempt"], deadline["due_at"]) == ("timeout", 2, pytest.approx(clock.now + 30))
    clock.now += 30
    engine.fire_due()
    run = stitch.http.get(f"/runs/{run_id}").json()
    assert run["status"] == "failed" and run["node_states"]["w"]["error"].startswith("timeout: no callback within 30 s")
    assert [a["status"] for a in history(engine, run_id, "w")] == ["failed", "failed"]
    assert [a["worker_status"] for a in history(engine, run_id, "w")][1] == 200


@pytest.mark.slow
def test_cancel_during_a_fan_out(stitch: StitchServer, engine: Engine, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(
        b.node("Splitter", "s", arrayPath=""),
        b.node("Worker", "x", mode="late", delay=1.0, timeoutSeconds=60),
        b.node("Collector", "c"),
        b.node("Worker", "after"),
    )
    run_id = start(stitch, b.graph(), [1, 2, 3, 4])
    wait_until(lambda: len(worker.received) == 4)
    result, sendings = engine.cancel_run(run_id)
    assert (result.outcome, sendings) == (Outcome.APPLIED, [])
    wait_until(lambda: len(worker.answers) == 4)
    assert sorted(worker.answers) == [(f"x_{i}", 1, 409) for i in range(4)]  # late callbacks refused
    # Refused callbacks send nothing; the outbox and timer checks below show nothing is left to send.
    assert sorted(worker.keys()) == ["x_0", "x_1", "x_2", "x_3"]  # nothing more was sent
    run = stitch.http.get(f"/runs/{run_id}").json()
    states = run["node_states"]
    assert run["status"] == "cancelled"
    assert {k: s["status"] for k, s in states.items()} == {
        "s": "completed",
        **{f"x_{i}": "cancelled" for i in range(4)},
        "x": "cancelled",
        "c": "cancelled",
        "after": "cancelled",
    }
    assert template_summary(node_states(states), "x") == {"status": "cancelled", "paths": {"cancelled": 4}}
    assert not rows(engine, timers, run_id)
    assert {r["state"] for r in rows(engine, outbox, run_id)} <= {"sent", "skipped"}
    assert engine.claim_due(now=time.time() + 3600) == []  # the reconciler finds nothing to send
    assert [(a["attempt"], a["status"]) for a in history(engine, run_id, "x_0")] == [(1, "cancelled")]
    assert history(engine, run_id, "x_0")[0]["finished_at"] is not None

    again, _ = engine.cancel_run(run_id)
    assert again.outcome is Outcome.DUPLICATE
    retry, _ = engine.retry(run_id, "x_0")
    assert retry.outcome is Outcome.CONFLICT and "cancelled" in retry.message
    assert stitch.http.post(f"/retry/{run_id}/x_0").status_code == 409


@pytest.mark.slow
def test_cancel_refusals(stitch: StitchServer, engine: Engine, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "w"), b.node("UX", "gate"))
    run_id = start(stitch, b.graph(), 1)
    stitch.wait_for(run_id, ("waiting_for_user",))
    result, _ = engine.cancel_run(run_id)
    assert result.outcome is Outcome.APPLIED
    assert stitch.http.post(f"/complete/{run_id}/gate", json={"ok": True}).status_code == 409
    b2 = Builder(worker.url)
    b2.node("Worker", "w")
    done = start(stitch, b2.graph(), 1)
    stitch.wait_for(done)
    refused, _ = engine.cancel_run(done)
    assert refused.outcome is Outcome.CONFLICT and "is completed" in refused.message
    missing, _ = engine.cancel_run("00000000-0000-0000-0000-000000000000")
    assert missing.outcome is Outcome.NOT_FOUND


@pytest.mark.slow
def test_template_paths_summarise_and_retry(stitch: StitchServer, engine: Engine, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Splitter", "s", arrayPath=""), b.node("Worker", "sq", mode="flaky"), b.node("Collector", "c"))
    graph = b.graph()
    plan = analyse(Graph.model_validate(graph))
    assert template_summary(initial_states(plan), "sq") == {"status": "pending", "paths": {}}

    run_id = start(stitch, graph, [1, 2, 3])
    run = stitch.wait_for(run_id)
    assert run["status"] == "failed"
    assert template_summary(node_states(run["node_states"]), "sq") == {"status": "failed", "paths": {"failed": 3}}
    retried = stitch.http.post(f"/retry/{run_id}/sq")
    assert retried.status_code == 200 and "3 failed path(s)" in retried.json()["detail"]
    run = stitch.wait_for(run_id)
    assert run["status"] == "completed" and run["node_states"]["c"]["output"] == [1, 2, 3]
    assert template_summary(node_states(run["node_states"]), "sq") == {"status": "completed", "paths": {"completed": 3}}
    again = stitch.http.post(f"/retry/{run_id}/sq")
    assert again.status_code == 400 and "no failed paths" in again.json()["detail"]

    empty = start(stitch, graph, [])
    run = stitch.wait_for(empty)
    assert run["status"] == "completed" and run["node_states"]["c"]["output"] == []
    assert template_summary(node_states(run["node_states"]), "sq") == {"status": "completed", "paths": {}}


def test_template_summary_takes_the_worst_path() -> None:
    def states(*statuses: str) -> dict[str, NodeState]:
        made = {"sq": NodeState("sq", None)}
        for i, status in enumerate(statuses):
            made[f"sq_{i}"] = NodeState("sq", [i], status)
        return made

    assert template_summary(states("completed", "retrying", "failed"), "sq")["status"] == "retrying"
    assert template_summary(states("completed", "waiting_for_user", "failed"), "sq")["status"] == "waiting_for_user"
    assert template_summary(states("completed", "cancelled", "failed"), "sq") == {
        "status": "failed",
        "paths": {"completed": 1, "cancelled": 1, "failed": 1},
    }
    assert template_summary(states("completed", "cancelled"), "sq")["status"] == "cancelled"
    assert template_summary(states("running", "retrying"), "sq")["status"] == "running"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"timeoutSeconds": 0}, "data.timeoutSeconds must be a positive number"),
        ({"timeoutSeconds": "5"}, "data.timeoutSeconds must be a positive number"),
        ({"retry": {"maxAttempts": 0}}, "data.retry.maxAttempts must be a whole number >= 1"),
        ({"retry": {"maxAttempts": True}}, "data.retry.maxAttempts must be a whole number >= 1"),
        ({"retry": {"maxAttempts": 2, "backoffSeconds": -1}}, "data.retry.backoffSeconds must be a number >= 0"),
        ({"retry": {"maxAttempts": 2, "backoffFactor": 0.5}}, "data.retry.backoffFactor must be a number >= 1"),
        ({"retry": {"maxAttempts": 2, "delay": 1}}, "data.retry has unknown keys 'delay'"),
        ({"retry": 3}, "data.retry must be an object"),
    ],
)
def test_timeouts_and_retry_policies_are_checked_when_saved(data: dict[str, Any], problem: str) -> None:
    b = Builder()
    b.node("Worker", "w", **data)
    with pytest.raises(GraphError) as caught:
        analyse(Graph.model_validate(b.graph()), webhooks=WebhookPolicy())
    assert problem in str(caught.value) and "'w'" in str(caught.value)
    ux = Builder()
    ux.node("UX", "gate", timeoutSeconds=5)
    with pytest.raises(GraphError, match="applies to Worker nodes only"):
        analyse(Graph.model_validate(ux.graph()), webhooks=WebhookPolicy())


def test_a_version_1_database_is_upgraded_in_place(database_url: str, worker: Worker) -> None:
    # The version-1 schema: today's tables without what step 2 adds.
    raw = create_engine(normalise_url(database_url))
    with raw.begin() as conn:
        kept = [
            schema.metadata.tables[name]
            for name in ("stitch_flows", "stitch_runs", "stitch_outbox", "stitch_events", "stitch_settings")
        ]
        schema.metadata.create_all(conn, tables=kept)
        for index in ("ix_stitch_runs_listing", "ix_stitch_runs_status", "ix_stitch_runs_flow_listing"):
            conn.execute(text(f"DROP INDEX {index}"))
        for table, column in (
            ("stitch_flows", "deleted_at"),
            ("stitch_events", "error"),
            ("stitch_events", "summary"),
            ("stitch_runs", "tally"),
        ):
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(text("CREATE TABLE stitch_schema_version (version INTEGER NOT NULL)"))
        conn.execute(text("INSERT INTO stitch_schema_version (version) VALUES (1)"))
        conn.execute(insert(schema.settings).values(key="callback_secret", value="s" * 64))
    raw.dispose()

    db = Database(database_url)
    try:
        assert db.version == STEPS[-1][0]
        with db.reading() as conn:
            found = inspect(conn)
            assert {"stitch_attempts", "stitch_timers", "stitch_paths", "stitch_flow_versions"} <= set(
                found.get_table_names()
            )
            assert "tally" in {c["name"] for c in found.get_columns("stitch_runs")}
            assert {"error", "summary"} <= {c["name"] for c in found.get_columns("stitch_events")}
            assert "deleted_at" in {c["name"] for c in found.get_columns("stitch_flows")}
            indexes = {i["name"] for i in found.get_indexes("stitch_runs")}
            assert {"ix_stitch_runs_status", "ix_stitch_runs_listing", "ix_stitch_runs_flow_listing"} <= indexes
        engine = Engine(db, "http://127.0.0.1:9")
        b = Builder(worker.url)
        b.node("Worker", "w", retry={"maxAttempts": 2})
        flow = Flows(db).create("f", Graph.model_validate(b.graph()))
        run, sendings = engine.start_run(flow["id"], 1)
        result, _ = engine.callback(run["id"], "w", 1, "failed", None, "no")
        assert result.outcome is Outcome.APPLIED and get_run(engine.db, run["id"])["status"] == "running"
        assert [(a["attempt"], a["status"]) for a in history(engine, run["id"], "w")] == [(1, "failed")]
    finally:
        db.dispose()


@pytest.mark.slow
def test_an_undeliverable_webhook_is_retried_under_the_policy_and_keeps_the_worker_status(
    stitch: StitchServer, engine: Engine, clock: Clock, worker: Worker
) -> None:
    b = Builder(worker.url)
    b.node("Worker", "w", mode="reject", retry={"maxAttempts": 2, "backoffSeconds": 3})
    run_id = start(stitch, b.graph(), 1)
    timer = wait_until(lambda: rows(engine, timers, run_id))[0]  # the server's dispatch failed: HTTP 500
    assert (timer["kind"], timer["attempt"]) == ("retry", 1)
    assert stitch.http.get(f"/runs/{run_id}").json()["node_states"]["w"]["status"] == "retrying"
    clock.now = timer["due_at"]
    (sending,) = engine.fire_due()
    status = httpx.post(sending.url, json=sending.payload).status_code
    assert status == 500
    result, more = engine.dispatch_failed(
        sending.outbox_id, run_id, "w", 2, "worker answered HTTP 500", worker_status=500
    )
    assert result.outcome is Outcome.APPLIED and more == []
    run = stitch.http.get(f"/runs/{run_id}").json()
    assert run["status"] == "failed" and run["node_states"]["w"]["error"] == "worker answered HTTP 500"
    second = history(engine, run_id, "w")[1]
    assert (second["attempt"], second["status"], second["worker_status"]) == (2, "failed", 500)
    assert [r["state"] for r in rows(engine, outbox, run_id)] == ["failed", "failed"]


def fan_flow(db: Database) -> tuple[Engine, str]:
    b = Builder()
    b.node("Splitter", "s")
    b.node("Worker", "w")
    b.node("Collector", "c")
    b.node("UX", "gate")
    b.chain("s", "w", "c", "gate")
    return Engine(db, "http://127.0.0.1:9"), str(Flows(db).create("fan", Graph.model_validate(b.graph()))["id"])


def test_a_run_stored_before_paths_were_kept_apart_goes_on_and_moves_them(database_url: str) -> None:
    """A fan-out under way when the database was upgraded: its paths in node_states and no tally,
    as version 3 stored it. Its next events count it once, finish it, and move its paths."""
    db = Database(database_url)
    try:
        engine, flow_id = fan_flow(db)
        run, _ = engine.start_run(flow_id, {"items": [1, 2, 3]})
        run_id = run["id"]
        engine.callback(run_id, "w_0", 1, "completed", "a", None)
        with db.transaction() as conn:  # back to the version 3 form
            kept = conn.execute(select(schema.runs.c.node_states).where(schema.runs.c.id == run_id)).scalar_one()
            apart = {k: v for k, v in conn.execute(select(schema.paths.c.key, schema.paths.c.state))}
            assert {"s", "c", "w_0", "w_1", "w_2"} <= set(apart) and "w_0" not in kept
            conn.execute(schema.paths.delete())
            conn.execute(
                schema.runs.update().where(schema.runs.c.id == run_id).values(node_states={**kept, **apart}, tally=None)
            )

        assert engine.callback(run_id, "w_1", 1, "completed", "b", None)[0].outcome is Outcome.APPLIED
        assert engine.callback(run_id, "w_2", 1, "completed", "c", None)[0].outcome is Outcome.APPLIED

        shown = get_run(db, run_id)
        assert shown["status"] == "waiting_for_user"
        assert shown["node_states"]["c"]["output"] == ["a", "b", "c"]
        assert [k for k in shown["node_states"]] == ["s", "w", "w_0", "w_1", "w_2", "c", "gate"]
        with db.reading() as conn:
            kept = conn.execute(select(schema.runs.c.node_states).where(schema.runs.c.id == run_id)).scalar_one()
            moved = set(conn.execute(select(schema.paths.c.key)).scalars())
            tally = conn.execute(select(schema.runs.c.tally).where(schema.runs.c.id == run_id)).scalar_one()
        assert set(kept) == {"w", "gate"} and moved == {"s", "c", "w_0", "w_1", "w_2"}
        # w: its template, pending as stored
        assert tally == {"statuses": {"pending": 1, "completed": 5, "waiting_for_user": 1}, "gather": {}}
        assert [g["node_id"] for g in waiting(db)] == ["gate"]
    finally:
        db.dispose()


def test_an_event_on_a_wide_fan_out_reads_and_writes_only_its_own_paths(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(database_url)
    read: list[Any] = []
    real = HotPath.read_paths

    def counted(self: HotPath, conn: Any, run_id: str, keys: Any = None) -> dict[str, Any]:
        found = real(self, conn, run_id, keys)
        read.append(len(found) if keys is not None else "all")
        return found

    monkeypatch.setattr(HotPath, "read_paths", counted)
    try:
        engine, flow_id = fan_flow(db)
        sizes = {}
        for width in (10, 1000):
            run_id = engine.start_run(flow_id, {"items": list(range(width))})[0]["id"]
            for i in range(width - 1):
                read.clear()
                engine.callback(run_id, f"w_{i}", 1, "completed", i, None)
                assert "all" not in read and sum(read) <= 3, (i, read)
            with db.reading() as conn:
                row = conn.execute(select(schema.runs).where(schema.runs.c.id == run_id)).mappings().one()
            sizes[width] = len(json.dumps(row["node_states"])) + len(json.dumps(row["tally"]))
            read.clear()
            engine.callback(run_id, f"w_{width - 1}", 1, "completed", width - 1, None)
            assert read.count("all") == 1  # the Collector gathers every path at once
            assert get_run(db, run_id)["node_states"]["c"]["output"] == list(range(width))
        assert sizes[1000] <= sizes[10] + 8, sizes  # the run row does not grow with the paths
    finally:
        db.dispose()
