"""Retention, on SQLite and PostgreSQL: finished runs and every row they own pruned by age and
by a count per flow, in batches; running and waiting runs never; SQLite gives the space back;
the server prunes in the background and says its retention in GET /runs; the CLI's manual pass.

Runs are made by an engine on the test's database (a UX gate completed, a Worker called back,
failed, cancelled), then aged by moving their timestamps back: the pruning reads only those.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, insert, select, update

from agentloom.stitch.db import Database
from agentloom.stitch.db import sqlite as sqlite_dialect
from agentloom.stitch.db.schema import attempts, events, outbox, runs, timers
from agentloom.stitch.engine import Engine
from agentloom.stitch.flows import Flows
from agentloom.stitch.models import Graph
from agentloom.stitch.retention import OWNED, TABLES, Policy, prune
from tests.conftest import PYTHON
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

DAY = timedelta(days=1)


@dataclass
class Made:
    db: Database
    engine: Engine
    flows: Flows


@pytest.fixture
def made(database_url: str) -> Iterator[Made]:
    db = Database(database_url)
    engine = Engine(db, "http://127.0.0.1:1")
    yield Made(db, engine, Flows(db, engine.webhooks))
    db.dispose()


def gate_graph() -> dict[str, Any]:
    b = Builder()
    b.node("UX", "gate")
    return b.graph()


def worker_graph() -> dict[str, Any]:
    b = Builder()
    b.node("Worker", "work", timeoutSeconds=600)  # a deadline: a timer row too
    return b.graph()


def new_flow(m: Made, graph: dict[str, Any]) -> str:
    return str(m.flows.create("retention", Graph.model_validate(graph))["id"])


def completed(m: Made, flow_id: str, pad: int = 0) -> str:
    run, _ = m.engine.start_run(flow_id, {"pad": "x" * pad})
    result, _ = m.engine.complete(run["id"], "gate", {"ok": True})
    assert result.outcome.http_status == 200
    return str(run["id"])


def waiting(m: Made, flow_id: str) -> str:
    run, _ = m.engine.start_run(flow_id, None)
    assert run["status"] == "waiting_for_user"
    return str(run["id"])


def worker_run(m: Made, flow_id: str, status: str | None) -> str:
    """A Worker run: left running (``None``), or called back ``completed`` or ``failed``."""
    run, _ = m.engine.start_run(flow_id, None)
    if status is not None:
        result, _ = m.engine.callback(run["id"], "work", 1, status, {"n": 1}, "boom" if status == "failed" else None)
        assert result.outcome.http_status == 200
    return str(run["id"])


def cancelled(m: Made, flow_id: str) -> str:
    run_id = waiting(m, flow_id)
    result, _ = m.engine.cancel_run(run_id)
    assert result.outcome.http_status == 200
    return run_id


def age(db: Database, run_ids: list[str], by: timedelta) -> None:
    """Move the runs' start and last change back by ``by`` (in Python: SQLite has no interval type)."""
    with db.transaction() as conn:
        rows = conn.execute(select(runs.c.id, runs.c.created_at, runs.c.updated_at).where(runs.c.id.in_(run_ids)))
        for row in rows.all():
            conn.execute(
                update(runs)
                .where(runs.c.id == row.id)
                .values(created_at=row.created_at - by, updated_at=row.updated_at - by)
            )


def owned_rows(db: Database, run_ids: list[str]) -> dict[str, int]:
    with db.reading() as conn:
        counts = {
            table.name: conn.execute(
                select(func.count()).select_from(table).where(table.c.run_id.in_(run_ids))
            ).scalar()
            for table in OWNED
        }
        counts[runs.name] = conn.execute(select(func.count()).where(runs.c.id.in_(run_ids))).scalar()
    return {name: int(count or 0) for name, count in counts.items()}


def statuses(db: Database, run_ids: list[str]) -> dict[str, str]:
    with db.reading() as conn:
        return {r.id: r.status for r in conn.execute(select(runs.c.id, runs.c.status).where(runs.c.id.in_(run_ids)))}


def test_finished_runs_older_than_the_age_are_pruned_with_all_their_rows(made: Made) -> None:
    gates, work = new_flow(made, gate_graph()), new_flow(made, worker_graph())
    old = [
        completed(made, gates),
        worker_run(made, work, "completed"),
        worker_run(made, work, "failed"),
        cancelled(made, gates),
    ]
    recent = [completed(made, gates), worker_run(made, work, "completed")]
    age(made.db, old, 15 * DAY)
    with made.db.transaction() as conn:  # a finished run's timers are dropped when it finishes; one left over
        conn.execute(insert(timers).values(run_id=old[1], node_key="work", attempt=1, kind="timeout", due_at=0.0))
    before_old, before_recent = owned_rows(made.db, old), owned_rows(made.db, recent)
    assert set(statuses(made.db, old).values()) == {"completed", "failed", "cancelled"}
    for table in (events.name, attempts.name, outbox.name, timers.name, runs.name):
        assert before_old[table] > 0, f"the old runs own no {table} rows: the test would prove nothing there"

    report = prune(made.db, Policy(max_age=14 * DAY))

    assert report.rows == before_old
    assert owned_rows(made.db, old) == dict.fromkeys(TABLES, 0)
    assert owned_rows(made.db, recent) == before_recent


def test_running_and_waiting_runs_are_never_pruned_however_old(made: Made) -> None:
    gates, work = new_flow(made, gate_graph()), new_flow(made, worker_graph())
    kept = [waiting(made, gates), worker_run(made, work, None), waiting(made, gates)]
    done = [completed(made, gates), worker_run(made, work, "completed")]
    age(made.db, kept + done, 1000 * DAY)
    assert set(statuses(made.db, kept).values()) == {"waiting_for_user", "running"}
    before = owned_rows(made.db, kept)

    report = prune(made.db, Policy(max_age=timedelta(0), max_runs_per_flow=1, batch_size=1))

    assert report.runs == len(done)
    assert owned_rows(made.db, kept) == before
    assert owned_rows(made.db, done)[runs.name] == 0


def test_max_runs_per_flow_keeps_each_flows_newest_finished_runs(made: Made) -> None:
    busy, quiet = new_flow(made, gate_graph()), new_flow(made, gate_graph())
    busy_runs = [completed(made, busy) for _ in range(7)]
    quiet_runs = [completed(made, quiet) for _ in range(3)]
    still_waiting = waiting(made, busy)  # the newest run of its flow, not finished: not counted, not pruned
    for i, run_id in enumerate(busy_runs):  # distinct ages, oldest first
        age(made.db, [run_id], (10 - i) * DAY)

    report = prune(made.db, Policy(max_runs_per_flow=5, batch_size=2))

    assert report.runs == 2
    assert set(statuses(made.db, busy_runs)) == set(busy_runs[2:])
    assert set(statuses(made.db, quiet_runs)) == set(quiet_runs)
    assert statuses(made.db, [still_waiting]) == {still_waiting: "waiting_for_user"}
    assert prune(made.db, Policy(max_runs_per_flow=5)).runs == 0  # a second pass finds nothing more


def test_dry_run_deletes_nothing_and_reports_the_same_counts(made: Made) -> None:
    gates, work = new_flow(made, gate_graph()), new_flow(made, worker_graph())
    old = [completed(made, gates) for _ in range(5)] + [worker_run(made, work, "failed") for _ in range(4)]
    age(made.db, old, 20 * DAY)
    policy = Policy(max_age=14 * DAY, max_runs_per_flow=3, batch_size=2)
    before = owned_rows(made.db, old)

    dry = prune(made.db, policy, dry_run=True)
    assert owned_rows(made.db, old) == before
    real = prune(made.db, policy)

    assert dry.dry_run and not real.dry_run
    assert dry.rows == real.rows == before
    assert owned_rows(made.db, old) == dict.fromkeys(TABLES, 0)


def test_a_batch_size_of_n_never_deletes_more_than_n_runs_per_transaction(made: Made) -> None:
    gates = new_flow(made, gate_graph())
    old = [completed(made, gates) for _ in range(10)]
    age(made.db, old, 30 * DAY)
    per_batch: list[int] = []
    commits: list[int] = []
    event.listen(made.db.engine, "commit", lambda conn: commits.append(1))

    report = prune(
        made.db,
        Policy(max_age=DAY, batch_size=3),
        on_pruned=lambda table, count: per_batch.append(count) if table == runs.name else None,
    )

    assert report.runs == 10
    assert per_batch == [3, 3, 3, 1]
    assert len(commits) >= math.ceil(10 / 3)  # each batch committed on its own


def page_count(path: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # PostgreSQL's space is autovacuum's


@SQLITE_ONLY
def test_the_sqlite_file_shrinks_after_pruning_and_stops_growing(made: Made, database_url: str) -> None:
    path = database_url.removeprefix("sqlite:///")
    gates = new_flow(made, gate_graph())
    empty = page_count(path)
    sizes = []
    for _ in range(3):  # fill, prune, fill again: the file is reused, not extended
        made_runs = [completed(made, gates, pad=4000) for _ in range(150)]
        full = page_count(path)
        assert full > empty + 150, "the runs did not take the pages this test measures"
        age(made.db, made_runs, 2 * DAY)
        prune(made.db, Policy(max_age=DAY))
        sizes.append((full, page_count(path)))
    for full, pruned in sizes:
        assert pruned < full / 4, sizes
    assert sizes[-1][0] <= sizes[0][0] * 1.1, sizes
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0


@SQLITE_ONLY
def test_the_sqlite_wal_is_cut_back_once_a_long_read_ends(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 2**20
    monkeypatch.setattr(sqlite_dialect, "WAL_LIMIT_BYTES", limit)
    path = database_url.removeprefix("sqlite:///")
    db = Database(database_url)
    engine = Engine(db, "http://127.0.0.1:1")
    made = Made(db, engine, Flows(db, engine.webhooks))
    try:
        gates = new_flow(made, gate_graph())
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM stitch_runs").fetchone()  # a snapshot held: no checkpoint restarts
        for _ in range(300):
            completed(made, gates, pad=4000)
        grown = os.path.getsize(f"{path}-wal")
        assert grown > 4 * limit, "the WAL did not grow past the limit: the test measures nothing"
        reader.execute("COMMIT")
        reader.close()
        for _ in range(300):  # the next checkpoints finish and the WAL restarts, cut back to the limit
            completed(made, gates, pad=4000)
        # From the limit it grows again up to the next automatic checkpoint (1,000 pages).
        assert os.path.getsize(f"{path}-wal") <= limit + 1100 * 4096, (grown, os.path.getsize(f"{path}-wal"))
    finally:
        db.dispose()


@SQLITE_ONLY
def test_an_older_sqlite_database_is_switched_to_incremental_vacuum_on_its_first_prune(
    made: Made, database_url: str
) -> None:
    path = database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path, isolation_level=None) as conn:  # as a database made before this change was
        conn.execute("PRAGMA auto_vacuum=NONE")
        conn.execute("VACUUM")
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    gates = new_flow(made, gate_graph())
    old = [completed(made, gates, pad=4000) for _ in range(100)]
    full = page_count(path)
    age(made.db, old, 2 * DAY)

    assert prune(made.db, Policy(max_age=DAY)).runs == 100

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert page_count(path) < full / 4


# -- the server and the CLI, real processes ---------------------------------------------------
def start_gate_run(server: StitchServer, flow_id: str, complete: bool) -> str:
    run = server.http.post(f"/flows/{flow_id}/runs", json={"input": {"n": 1}})
    assert run.status_code == 201, run.text
    run_id = str(run.json()["id"])
    if complete:
        done = server.http.post(f"/complete/{run_id}/gate", json={"ok": True})
        assert done.status_code == 200, done.text
    return run_id


def new_server_flow(server: StitchServer) -> str:
    flow = server.http.post("/flows", json={"name": "retention", "graph": gate_graph()})
    assert flow.status_code == 201, flow.text
    return str(flow.json()["id"])


def cli_prune(database_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STITCH_", "AGENTLOOM_"))}
    env["AGENTLOOM_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run(
        [PYTHON, "-m", "agentloom", "stitch", "prune", "--database", database_url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def printed_counts(output: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^\s+(stitch_\w+)\s+(\d+)$", output, re.MULTILINE)}


def test_cli_prune_end_to_end(stitch: StitchServer, database_url: str, tmp_path: Path) -> None:
    flow_id = new_server_flow(stitch)
    other = new_server_flow(stitch)
    old = [start_gate_run(stitch, flow_id, complete=True) for _ in range(3)]
    old_other = start_gate_run(stitch, other, complete=True)
    old_waiting = start_gate_run(stitch, flow_id, complete=False)
    recent = start_gate_run(stitch, flow_id, complete=True)
    db = Database(database_url)
    try:
        age(db, [*old, old_other, old_waiting], 20 * DAY)
        expected = owned_rows(db, old)
    finally:
        db.dispose()

    dry = cli_prune(database_url, tmp_path, "--older-than", "14d", "--flow", flow_id, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would delete" in dry.stdout
    assert printed_counts(dry.stdout) == expected
    assert all(stitch.http.get(f"/runs/{run_id}").status_code == 200 for run_id in old)

    done = cli_prune(database_url, tmp_path, "--older-than", "14d", "--flow", flow_id)
    assert done.returncode == 0, done.stderr
    assert "deleted" in done.stdout
    assert printed_counts(done.stdout) == expected
    assert all(stitch.http.get(f"/runs/{run_id}").status_code == 404 for run_id in old)
    for kept in (old_other, old_waiting, recent):  # another flow's; not finished; not old enough
        assert stitch.http.get(f"/runs/{kept}").status_code == 200

    everything = cli_prune(database_url, tmp_path, "--older-than", "336h")
    assert everything.returncode == 0, everything.stderr
    assert printed_counts(everything.stdout)[runs.name] == 1  # the other flow's old run
    assert stitch.http.get(f"/runs/{old_other}").status_code == 404


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--older-than", "2w"), "--older-than"),
        (("--older-than", "99999999999d"), "--older-than"),  # beyond a date: the usage error, no traceback
        (("--older-than", "14d", "--flow", "not-a-uuid"), "--flow"),
        (("--older-than", "14d", "--flow", "12345678-1234-1234-1234-123456789012"), "--flow"),
    ],
)
def test_cli_prune_refuses_bad_options_naming_the_option_and_the_fix(
    database_url: str, tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    result = cli_prune(database_url, tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {named}:"), result.stderr
    assert re.search(r"for example 14d|at most \d+d|flow ids are UUIDs|GET /api/stitch/flows", result.stderr)
    assert "Traceback" not in result.stderr


def test_the_server_prunes_in_the_background_and_says_its_retention(database_url: str, tmp_path: Path) -> None:
    server = StitchServer(database_url, tmp_path)
    server.env.update(STITCH_RETENTION_MAX_RUNS_PER_FLOW="2", STITCH_RETENTION_INTERVAL_SECONDS="0.3")
    server.start()
    try:
        flow_id = new_server_flow(server)
        finished = [start_gate_run(server, flow_id, complete=True) for _ in range(5)]
        still_waiting = start_gate_run(server, flow_id, complete=False)
        deadline = time.monotonic() + 30
        while True:
            page = server.http.get("/runs", params={"flow_id": flow_id})
            assert page.status_code == 200, page.text
            listed = [run["id"] for run in page.json()["runs"]]
            if len(listed) == 3:
                break
            assert time.monotonic() < deadline, f"the server did not prune: {listed}"
            time.sleep(0.1)
        assert set(listed) == {still_waiting, *finished[-2:]}
        assert page.json()["retention"] == {"max_age_hours": 336.0, "max_runs_per_flow": 2}
        schema = httpx.get(server.base + "/openapi.json", timeout=30).json()["components"]["schemas"]
        assert "retention" in schema["RunPage"]["properties"]
        assert set(schema["Retention"]["properties"]) == {"max_age_hours", "max_runs_per_flow"}
    finally:
        server.stop()


def test_a_server_with_retention_off_keeps_everything_and_says_so(database_url: str, tmp_path: Path) -> None:
    server = StitchServer(database_url, tmp_path)
    server.env.update(
        STITCH_RETENTION_ENABLED="false",
        STITCH_RETENTION_MAX_RUNS_PER_FLOW="1",
        STITCH_RETENTION_INTERVAL_SECONDS="0.2",
    )
    server.start()
    try:
        flow_id = new_server_flow(server)
        made_runs = [start_gate_run(server, flow_id, complete=True) for _ in range(3)]

        def created(run_id: str) -> datetime:
            stamp = server.http.get(f"/runs/{run_id}").json()["created_at"]
            return datetime.fromisoformat(stamp.replace("Z", "+00:00"))

        # Five intervals by the server's own clock (its stamps on new runs, which are kept too): a
        # pruner would have run by then.
        first = created(made_runs[0])
        deadline = time.monotonic() + 60
        while created(made_runs[-1]) < first + timedelta(seconds=5 * 0.2):
            assert time.monotonic() < deadline, "the server's clock did not move"
            time.sleep(0.1)
            made_runs.append(start_gate_run(server, flow_id, complete=True))
        page = server.http.get("/runs", params={"flow_id": flow_id}).json()
        assert page["retention"] is None
        assert {run["id"] for run in page["runs"]} == set(made_runs)
    finally:
        server.stop()


def test_policy_of_settings_reads_zero_as_no_limit() -> None:
    assert Policy.of(0, 0, 10).describe() == {"max_age_hours": None, "max_runs_per_flow": None}
    assert not Policy.of(0, 0, 10).limits
    assert Policy.of(336, 10_000, 200) == Policy(timedelta(hours=336), 10_000, 200)
