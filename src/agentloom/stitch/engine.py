"""Stitch's operations: each one transaction, serialised per run, with its webhooks in the outbox.

No run state is kept in memory: every event reads the run from the database under a lock,
applies :mod:`execution`, and writes states, events, attempt history, timers and outbox rows
in the same commit. (The parsed graph is cached per flow version; it is derived from the
database, never state.)

Timers (deadlines, automatic retries) are rows too: :meth:`Engine.fire_due` applies those
that came due, each in its run's transaction, so any server process may fire any of them.
Locks are always taken run first, then its timers, by every writer: no deadlock between a
timer firing and a callback or a cancel on the same run.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, RowMapping, delete, insert, select, update

from agentloom.core.timestamps import iso
from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import attempts, flows, outbox, runs, timers
from agentloom.stitch.execution import (
    Execution,
    Outcome,
    Result,
    initial_states,
)
from agentloom.stitch.graph import Plan, analyse
from agentloom.stitch.ids import is_uuid, missing
from agentloom.stitch.models import Graph
from agentloom.stitch.signing import Signer
from agentloom.stitch.webhooks import WebhookPolicy

log = logging.getLogger(__name__)
LEASE_SECONDS = 30.0  # a sender owns a dispatch this long; after that the reconciler re-sends it


@dataclass(frozen=True)
class Sending:
    """A webhook committed to the outbox and leased to this process to send now."""

    outbox_id: int
    run_id: str
    key: str
    attempt: int
    url: str
    payload: dict[str, Any]


def now() -> datetime:
    return datetime.now(UTC)


class Engine:
    def __init__(self, db: Database, base_url: str, secret: str | None = None, lease_seconds: float = LEASE_SECONDS,
                 webhooks: WebhookPolicy | None = None, node_timeout: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.node_timeout = node_timeout
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.webhooks = webhooks or WebhookPolicy()
        self.signer = Signer(secret or db.setting("callback_secret") or "", base_url)

    # -- runs --------------------------------------------------------------------
    def start_run(self, flow_id: str, run_input: Any) -> tuple[dict[str, Any], list[Sending]]:
        if not is_uuid(flow_id):
            raise missing("flow", flow_id)
        with self.db.transaction() as conn:
            # A shared lock: a delete of the flow waits for this run to exist, and then cancels it.
            live = select(flows).where(flows.c.id == flow_id.lower(), flows.c.deleted_at.is_(None))
            flow = conn.execute(live.with_for_update(read=True)).mappings().first()
            if flow is None:
                raise missing("flow", flow_id)
            flow_id = flow["id"]  # as stored (lowercase), whatever case the caller used
            plan = _plan(flow_id, flow["version"], flow["graph"])
            run_id = str(uuid.uuid4())
            stamp = now()
            execution = self._execution(run_id, plan, initial_states(plan), run_input)
            execution.start()
            row = {"id": run_id, "flow_id": flow_id, "flow_version": flow["version"], "graph": flow["graph"],
                   "input": run_input, "node_states": execution.states, "status": execution.run_status(),
                   "created_at": stamp, "updated_at": stamp}
            conn.execute(insert(runs).values(**row))
            sendings = self._record(conn, run_id, execution, stamp)
        return row, sendings

    # -- events on a run -----------------------------------------------------------
    def callback(self, run_id: str, key: str, attempt: int, status: str, output: Any, error: str | None) -> tuple[Result, list[Sending]]:
        return self._event(run_id, lambda ex: ex.callback(key, attempt, status, output, error))

    def complete(self, run_id: str, key: str, output: Any) -> tuple[Result, list[Sending]]:
        return self._event(run_id, lambda ex: ex.complete(key, output))

    def retry(self, run_id: str, key: str) -> tuple[Result, list[Sending]]:
        return self._event(run_id, lambda ex: ex.retry(key))

    def dispatch_failed(self, outbox_id: int, run_id: str, key: str, attempt: int, reason: str,
                        worker_status: int | None = None) -> tuple[Result, list[Sending]]:
        def fail(ex: Execution, conn: Connection) -> Result:
            # Only a row still pending fails the node: a cancelled run's rows were skipped, and a
            # row another sender delivered meanwhile (its lease ran out during our tries) is sent.
            still_pending = conn.execute(update(outbox).where(outbox.c.id == outbox_id, outbox.c.state == "pending")
                                         .values(state="failed", last_error=reason)).rowcount
            if not still_pending:
                return Result(Outcome.DUPLICATE, "the webhook was delivered by another sender or the run moved on; nothing changed")
            if worker_status is not None:
                conn.execute(update(attempts).where(attempts.c.run_id == run_id, attempts.c.node_key == key,
                                                    attempts.c.attempt == attempt).values(worker_status=worker_status))
            return ex.dispatch_failed(key, attempt, reason)

        return self._event(run_id, fail, with_connection=True)

    def cancel_run(self, run_id: str) -> tuple[Result, list[Sending]]:
        """Cancel a running or waiting run: its unfinished nodes, unsent webhooks and timers."""
        def cancel(ex: Execution, conn: Connection) -> Result:
            result = ex.cancel()
            if result.outcome is Outcome.APPLIED:
                conn.execute(update(outbox).where(outbox.c.run_id == run_id, outbox.c.state == "pending").values(state="skipped"))
                conn.execute(delete(timers).where(timers.c.run_id == run_id))
            return result

        return self._event(run_id, cancel, with_connection=True)

    def fire_due(self, limit: int = 100) -> list[Sending]:
        """Apply the timers due by ``clock()``, one transaction per run; the webhooks to send."""
        at = self.clock()
        with self.db.reading() as conn:
            due = conn.execute(select(timers.c.id, timers.c.run_id).where(timers.c.due_at <= at)
                               .order_by(timers.c.due_at, timers.c.id).limit(limit)).all()
        by_run: dict[str, list[int]] = {}
        for timer_id, run_id in due:
            by_run.setdefault(run_id, []).append(timer_id)
        sendings: list[Sending] = []
        for run_id, ids in by_run.items():
            def fire(ex: Execution, conn: Connection, ids: list[int] = ids) -> Result:
                # Under the run's lock; a timer another process fired meanwhile is gone (or
                # still locked by it, on PostgreSQL: skipped).
                rows = conn.execute(select(timers).where(timers.c.id.in_(ids)).order_by(timers.c.due_at, timers.c.id)
                                    .with_for_update(skip_locked=True)).mappings().all()
                for row in rows:
                    ex.fire_timer(row["node_key"], row["attempt"], row["kind"])
                if rows:
                    conn.execute(delete(timers).where(timers.c.id.in_([row["id"] for row in rows])))
                return Result(Outcome.APPLIED, f"{len(rows)} timer(s) fired")

            try:
                sendings.extend(self._event(run_id, fire, with_connection=True)[1])
            except Exception:  # one run that cannot be loaded must not hold back the others' timers
                log.exception("firing the timers of run %s failed; they stay due", run_id)
        return sendings

    def _event(self, run_id: str, apply: Any, *, with_connection: bool = False) -> tuple[Result, list[Sending]]:
        if not is_uuid(run_id):
            return Result(Outcome.NOT_FOUND, str(missing("run", run_id))), []
        hot = self.db.hot
        with self.db.transaction() as conn:
            row = hot.read_run(conn, run_id)  # locks the run (FOR UPDATE; SQLite: BEGIN IMMEDIATE)
            if row is None:
                return Result(Outcome.NOT_FOUND, f"no run {run_id}"), []
            flow_id, version, states, run_input = row
            plan = _PLANS.get((flow_id, version)) or _plan(flow_id, version, hot.read_graph(conn, run_id))
            execution = self._execution(run_id, plan, states, run_input)
            result = apply(execution, conn) if with_connection else apply(execution)
            if not execution.events:
                return result, []
            stamp = now()
            hot.run(conn, "update_run", (hot.json_in(execution.states), execution.run_status(), hot.stamp(stamp), run_id))
            return result, self._record(conn, run_id, execution, stamp)

    def _execution(self, run_id: str, plan: Plan, states: dict[str, Any], run_input: Any) -> Execution:
        return Execution(run_id, plan, states, run_input, self.signer.callback_url, iso(now()),
                         at=self.clock(), node_timeout=self.node_timeout)

    def _record(self, conn: Connection, run_id: str, execution: Execution, stamp: datetime) -> list[Sending]:
        """The rows an event writes beside the run's states, on the driver's cursor (:mod:`db.hot`)."""
        hot, at, json_in = self.db.hot, self.db.hot.stamp(stamp), self.db.hot.json_in
        hot.many(conn, "event", ((run_id, e.key, e.status, e.attempt, at, e.error, e.summary) for e in execution.events))
        changes = execution.attempts.values()
        hot.many(conn, "attempt", (
            (run_id, c.key, c.attempt, c.status, json_in(c.input), json_in(c.output), c.error, at, at if c.finished else None)
            for c in changes if c.new))
        hot.many(conn, "end_attempt", (
            (c.status, json_in(c.output), c.error, at if c.finished else None, run_id, c.key, c.attempt)
            for c in changes if not c.new))
        hot.many(conn, "drop_timer", ((run_id, k, a, kind) for k, a, kind in execution.timers_done))
        hot.many(conn, "timer", ((run_id, t.key, t.attempt, t.kind, t.due_at) for t in execution.timers))
        # Leased to this process at once: it sends right after the commit. If it dies first,
        # the lease runs out and the reconciler sends it.
        lease = time.time() + self.lease_seconds
        sendings = []
        for d in execution.dispatches:
            cur = hot.run(conn, "outbox", (run_id, d.key, d.attempt, d.url, json_in(d.payload), lease, at))
            sendings.append(Sending(cur.fetchone()[0], run_id, d.key, d.attempt, d.url, d.payload))
        return sendings

    # -- delivery bookkeeping --------------------------------------------------------
    def mark_sent(self, sent: list[tuple[int, int | None]]) -> None:
        """Outbox rows the worker accepted, each with the HTTP status it answered (kept in the
        attempt's history). A cancelled run's rows were skipped: they stay so."""
        if not sent:
            return
        hot = self.db.hot
        with self.db.transaction() as conn:
            hot.many(conn, "sent", ((outbox_id,) for outbox_id, _ in sent))
            hot.many(conn, "worker_status", ((status, outbox_id) for outbox_id, status in sent if status is not None))

    def claim_due(self, limit: int = 100, now: float | None = None) -> list[Sending]:
        """Dispatches whose sender died or never started: leased again to this process."""
        rows = self.db.claim_due(time.time() if now is None else now, self.lease_seconds, limit)
        return [_sending(r) for r in rows]

    def pending_dispatches(self) -> int:
        from sqlalchemy import func

        with self.db.reading() as conn:
            return int(conn.execute(select(func.count()).select_from(outbox).where(outbox.c.state == "pending")).scalar() or 0)


def _sending(row: RowMapping) -> Sending:
    return Sending(row["id"], row["run_id"], row["node_key"], row["attempt"], row["url"], row["payload"])


def _plan(flow_id: str, version: int, graph: dict[str, Any]) -> Plan:
    """The analysed graph, cached per flow version (a run keeps the version it started with)."""
    cached = _PLANS.get((flow_id, version))
    if cached is None:
        cached = analyse(Graph.model_validate(graph))
        if len(_PLANS) > 512:
            _PLANS.clear()
        _PLANS[(flow_id, version)] = cached
    return cached


_PLANS: dict[tuple[str, int], Plan] = {}
