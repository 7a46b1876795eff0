"""Group commit (stitch/groupcommit.py, Engine.callbacks): callbacks that arrive together are
committed together, and each still gets exactly the answer it would get alone."""

from __future__ import annotations

import asyncio
import random
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import events
from agentloom.stitch.engine import Engine, Sending
from agentloom.stitch.execution import Outcome
from agentloom.stitch.flows import Flows
from agentloom.stitch.groupcommit import GroupCommit
from agentloom.stitch.models import Graph
from agentloom.stitch.queries import get_run

CHAIN = {
    "nodes": [{"id": f"s{i}", "type": "Worker", "data": {"webhookUrl": "http://127.0.0.1:9/w"}} for i in range(3)],
    "edges": [{"id": f"e{i}", "source": f"s{i}", "target": f"s{i + 1}"} for i in range(2)],
}


def start_runs(engine: Engine, n: int) -> list[Sending]:
    flow = Flows(engine.db).create("chain", Graph.model_validate(CHAIN))
    return [engine.start_run(flow["id"], {"n": i})[1][0] for i in range(n)]


def call(s: Sending, output: Any = "done") -> tuple[str, str, int, str, Any, None]:
    return (s.run_id, s.key, s.attempt, "completed", {"from": s.key, "value": output}, None)


def event_count(engine: Engine) -> int:
    with engine.db.reading() as conn:
        return int(conn.execute(select(func.count()).select_from(events)).scalar() or 0)


def test_a_batch_answers_each_callback_as_alone(database_url: str) -> None:
    engine = Engine(Database(database_url), "http://127.0.0.1:9")
    first, second = start_runs(engine, 2)
    calls = [
        call(second),
        call(first),
        call(first),  # the second on a run in one batch: a duplicate
        (first.run_id, "nowhere", 1, "completed", None, None),
        ("00000000-0000-4000-8000-000000000000", "s0", 1, "completed", None, None),
        ("not-a-run", "s0", 1, "completed", None, None),
        (first.run_id, "s0", 7, "completed", None, None),
    ]
    answers = engine.callbacks(calls)
    assert [result.outcome for result, _ in answers] == [
        Outcome.APPLIED,
        Outcome.APPLIED,
        Outcome.DUPLICATE,
        Outcome.NOT_FOUND,
        Outcome.NOT_FOUND,
        Outcome.NOT_FOUND,
        Outcome.CONFLICT,
    ]
    # Each applied callback got its own run's next webhook; nothing else dispatched anything.
    assert [[(s.run_id, s.key, s.attempt) for s in more] for _, more in answers] == [
        [(second.run_id, "s1", 1)],
        [(first.run_id, "s1", 1)],
        [],
        [],
        [],
        [],
        [],
    ]
    assert all(s.outbox_id for _, more in answers for s in more)
    for sending in (first, second):
        states = get_run(engine.db, sending.run_id)["node_states"]
        assert states["s0"]["status"] == "completed" and states["s0"]["output"] == {"from": "s0", "value": "done"}
        assert states["s1"]["status"] == "running"


def test_callbacks_on_one_run_apply_in_arrival_order(database_url: str) -> None:
    engine = Engine(Database(database_url), "http://127.0.0.1:9")
    (s0,) = start_runs(engine, 1)
    ((_, (s1,)),) = engine.callbacks([call(s0)])
    # s1's callback, then a late repeat of s0's with another output, then s1's again: one round each.
    answers = engine.callbacks([call(s1, "first"), call(s0, "late"), call(s1, "second")])
    assert [r.outcome for r, _ in answers] == [Outcome.APPLIED, Outcome.DUPLICATE, Outcome.DUPLICATE]
    states = get_run(engine.db, s0.run_id)["node_states"]
    assert states["s1"]["output"] == {"from": "s1", "value": "first"}
    assert states["s0"]["output"] == {"from": "s0", "value": "done"}
    assert [s.key for s in answers[0][1]] == ["s2"]


def test_a_failing_callback_fails_alone_and_the_rest_commit(database_url: str) -> None:
    engine = Engine(Database(database_url), "http://127.0.0.1:9")
    good, bad, other = start_runs(engine, 3)
    before = event_count(engine)
    commits = GroupCommit(engine)
    unstorable = (bad.run_id, bad.key, bad.attempt, "completed", {"set": {1, 2}}, None)  # not JSON: its write raises

    async def arrive_together() -> list[Any]:
        return await asyncio.gather(
            commits.callback(*call(good)),
            commits.callback(*unstorable),
            commits.callback(*call(other)),
            return_exceptions=True,
        )

    answers = asyncio.run(arrive_together())
    assert isinstance(answers[1], TypeError)
    assert [answers[0][0].outcome, answers[2][0].outcome] == [Outcome.APPLIED, Outcome.APPLIED]
    assert get_run(engine.db, bad.run_id)["node_states"]["s0"]["status"] == "running"  # nothing of it was kept
    assert get_run(engine.db, good.run_id)["node_states"]["s0"]["status"] == "completed"
    assert event_count(engine) == before + 4  # two completions, two next nodes started


def test_callbacks_arriving_together_share_a_transaction(database_url: str) -> None:
    engine = Engine(Database(database_url), "http://127.0.0.1:9")
    sendings = start_runs(engine, 12)
    commits = GroupCommit(engine)
    batches: list[int] = []
    real = engine.callbacks

    def counted(calls: Any) -> Any:
        batches.append(len(calls))
        return real(calls)

    engine.callbacks = counted  # type: ignore[method-assign]  # counts; the real method does the work

    async def arrive_together() -> list[Any]:
        return await asyncio.gather(*(commits.callback(*call(s)) for s in sendings))

    answers = asyncio.run(arrive_together())
    assert [r.outcome for r, _ in answers] == [Outcome.APPLIED] * 12
    assert batches == [12]


def test_batches_in_two_processes_do_not_deadlock(postgres: str, tmp_path: Path) -> None:
    """Two engines (as two server processes) commit batches over the same runs in opposite
    orders, while webhooks are marked sent: no deadlock, every callback applied once."""
    from tests.stitch.conftest import drop_pg_database, fresh_pg_database

    url = fresh_pg_database(postgres)
    try:
        engines = [Engine(Database(url), "http://127.0.0.1:9") for _ in range(2)]
        sendings = start_runs(engines[0], 30)
        failures: list[BaseException] = []
        applied: list[Outcome] = []

        def process(engine: Engine, order: list[Sending]) -> None:
            try:
                for start in range(0, len(order), 10):
                    batch = order[start : start + 10]
                    answers = engine.callbacks([call(s) for s in batch])
                    applied.extend(r.outcome for r, _ in answers)
                    engine.mark_sent([(s, 200) for _, more in answers for s in more] + [(s, 200) for s in batch])
            except BaseException as exc:
                failures.append(exc)

        shuffled = random.Random(7).sample(sendings, len(sendings))
        threads = [
            threading.Thread(target=process, args=(engines[0], shuffled)),
            threading.Thread(target=process, args=(engines[1], shuffled[::-1])),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures
        assert sorted(o.name for o in applied) == sorted(["APPLIED"] * 30 + ["DUPLICATE"] * 30)
        for engine in engines:
            engine.db.dispose()
    finally:
        drop_pg_database(postgres, url)
