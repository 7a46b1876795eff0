"""Stitch's operations: each one transaction, serialised per run, with its webhooks in the outbox.

No run state is kept in memory: every event reads the run from the database under a lock,
applies :mod:`execution`, and writes states, events, attempt history, timers and outbox rows
in the same commit. The run row holds the states of the nodes outside fan-outs and the run's
tally; the states that grow with a fan-out are rows of their own (:func:`apart`), read when
the event asks for them and written when it changed them. (The parsed graph is cached per
flow version; it is derived from the database, never state.)

Timers (deadlines, automatic retries) are rows too: :meth:`Engine.fire_due` applies those
that came due, each in its run's transaction, so any server process may fire any of them.
Locks are always taken run first, then its timers, by every writer: no deadlock between a
timer firing and a callback or a cancel on the same run.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, RowMapping, delete, func, select, update

from agentloom.core.timestamps import iso
from agentloom.stitch import input_schemas, metrics, plans
from agentloom.stitch.db import Database
from agentloom.stitch.db.hot import RunRow
from agentloom.stitch.db.schema import attempts, flows, outbox, runs, timers
from agentloom.stitch.execution import (
    Execution,
    Outcome,
    Result,
    initial_states,
)
from agentloom.stitch.graph import Plan
from agentloom.stitch.ids import is_uuid, missing
from agentloom.stitch.models import NodeType
from agentloom.stitch.signing import Signer
from agentloom.stitch.state import NodeState, NodeStates, RunState, Tally, node_states
from agentloom.stitch.webhooks import WebhookPolicy

log = logging.getLogger(__name__)
LEASE_SECONDS = 30.0  # a sender owns a dispatch this long; after that the reconciler re-sends it
_CHECKS = 5  # a run's input checked against so many versions saved one after the other, then 409


class FlowChanging(RuntimeError):
    """The flow was saved again and again while a run of it was being started (409)."""


class _Unplanned(Exception):
    """A transaction met a flow version this process has not planned (see ``Engine._planned``)."""

    def __init__(self, flow_id: str, version: int, run_id: str) -> None:
        super().__init__(f"flow {flow_id} version {version} is not planned in this process")
        self.flow_id, self.version, self.run_id = flow_id, version, run_id


_T = TypeVar("_T")


@dataclass(frozen=True)
class Sending:
    """A webhook committed to the outbox and leased to this process to send now."""

    outbox_id: int
    run_id: str
    key: str
    attempt: int
    url: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Written:
    """What one run's event wrote: its webhooks to send, and the run's status after it."""

    sendings: list[Sending]
    status: str


# A worker's callback: (run_id, node key, attempt, status, output, error).
CallbackCall = tuple[str, str, int, str, Any, "str | None"]


def now() -> datetime:
    return datetime.now(UTC)


class Engine:
    def __init__(
        self,
        db: Database,
        base_url: str,
        secret: str | None = None,
        lease_seconds: float = LEASE_SECONDS,
        webhooks: WebhookPolicy | None = None,
        node_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
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
        # A flow version is planned, and a run's input checked against its schema, outside the
        # transaction (a check may take up to its budget, and must hold no lock meanwhile); the
        # run then starts if the version checked is still the flow's. A version already planned
        # and without an input schema starts in the first transaction.
        checked = None
        for _ in range(_CHECKS):
            started = self._start(flow_id, run_input, checked)
            if started is not None:
                return started
            checked = self._check_input(flow_id.lower(), run_input)
        raise FlowChanging(f"flow {flow_id} was saved anew {_CHECKS} times while this run was starting; start it again")

    def _check_input(self, flow_id: str, run_input: Any) -> tuple[str, int] | None:
        """The flow version whose input schema ``run_input`` fits (refused otherwise), or None
        when the flow is not found (the transaction says so)."""
        with self.db.reading() as conn:
            row = conn.execute(
                select(flows.c.id, flows.c.version).where(flows.c.id == flow_id, flows.c.deleted_at.is_(None))
            ).first()
            if row is None:
                return None
            plan, _ = plans.planned(row.id, row.version, lambda: self.db.hot.read_flow_graph(conn, row.id))
        if plan.input_schema is not None:
            input_schemas.refuse_misfit(plan.input_schema, run_input, ("body", "input"), "input")
        return row.id, row.version

    def _start(
        self, flow_id: str, run_input: Any, checked: tuple[str, int] | None
    ) -> tuple[dict[str, Any], list[Sending]] | None:
        hot = self.db.hot
        with self.db.transaction() as conn:
            # A shared lock: a delete of the flow waits for this run to exist, and then cancels it.
            flow = hot.read_flow(conn, flow_id.lower())
            if flow is None:
                raise missing("flow", flow_id)
            flow_id, version = flow  # the id as stored (lowercase), whatever case the caller used
            if not plans.known(flow_id, version):
                return None  # planned (its schemas checked) outside the transaction first
            plan, graph = plans.planned(flow_id, version, lambda: hot.read_flow_graph(conn, flow_id))
            if plan.input_schema is not None and checked != flow:
                return None  # not checked yet, or saved anew since
            run_id = str(uuid.uuid4())
            stamp = now()
            nodes = NodeStates(initial_states(plan))
            execution = self._execution(RunState(run_id, run_input, nodes), plan)
            nodes.changed.update(nodes.at_hand())  # every state is new
            execution.start()
            states = _row_states(plan, nodes)
            row = {
                "id": run_id,
                "flow_id": flow_id,
                "flow_version": version,
                "graph": graph,
                "input": run_input,
                "node_states": states,
                "status": execution.run_status(),
                "created_at": stamp,
                "updated_at": stamp,
            }
            # The run's copy of the graph is copied by the database, not written again from here.
            hot.run(
                conn,
                "insert_run",
                (
                    run_id,
                    hot.json_in(run_input),
                    hot.json_in(states),
                    hot.json_in(execution.tally.to_json()),
                    row["status"],
                    hot.stamp(stamp),
                    hot.stamp(stamp),
                    flow_id,
                ),
            )
            written = self._write(conn, [(run_id, execution)], stamp)[0]
        row["node_states"] = {k: s.to_json() for k, s in nodes.items()}
        metrics.run_started(flow_id)
        metrics.applied(flow_id, execution, written.status)
        return row, written.sendings

    # -- events on a run -----------------------------------------------------------
    def callback(
        self, run_id: str, key: str, attempt: int, status: str, output: Any, error: str | None
    ) -> tuple[Result, list[Sending]]:
        return self._event(run_id, lambda ex: ex.callback(key, attempt, status, output, error))

    def complete(self, run_id: str, key: str, output: Any) -> tuple[Result, list[Sending]]:
        """Complete a UX gate; an output that does not fit its input schema is refused first,
        outside the run's transaction."""
        schema = self._gate_schema(run_id, key)
        if schema is not None:  # the gate keeps waiting for an output that fits
            input_schemas.refuse_misfit(schema, output, ("body",), "output")
        return self._event(run_id, lambda ex: ex.complete(key, output))

    def _gate_schema(self, run_id: str, key: str) -> dict[str, Any] | None:
        """The input schema of the UX gate ``key`` of the run names (a path key included), if any."""
        if not is_uuid(run_id):
            return None
        with self.db.reading() as conn:
            row = conn.execute(select(runs.c.flow_id, runs.c.flow_version).where(runs.c.id == run_id)).first()
            if row is None:
                return None
            plan, _ = plans.planned(row.flow_id, row.flow_version, lambda: self.db.hot.read_graph(conn, run_id))
        node_id = plan.node_of(key)
        return None if node_id is None else plan.gate_schemas.get(node_id)

    def retry(self, run_id: str, key: str) -> tuple[Result, list[Sending]]:
        return self._event(run_id, lambda ex: ex.retry(key))

    def dispatch_failed(
        self, outbox_id: int, run_id: str, key: str, attempt: int, reason: str, worker_status: int | None = None
    ) -> tuple[Result, list[Sending]]:
        def fail(ex: Execution, conn: Connection) -> Result:
            # Only a row still pending fails the node: a cancelled run's rows were skipped, and a
            # row another sender delivered meanwhile (its lease ran out during our tries) is sent.
            still_pending = conn.execute(
                update(outbox)
                .where(outbox.c.id == outbox_id, outbox.c.state == "pending")
                .values(state="failed", last_error=reason)
            ).rowcount
            if not still_pending:
                return Result(
                    Outcome.DUPLICATE,
                    "the webhook was delivered by another sender or the run moved on; nothing changed",
                )
            if worker_status is not None:
                conn.execute(
                    update(attempts)
                    .where(attempts.c.run_id == run_id, attempts.c.node_key == key, attempts.c.attempt == attempt)
                    .values(worker_status=worker_status)
                )
            return ex.dispatch_failed(key, attempt, reason)

        return self._event(run_id, fail, with_connection=True)

    def cancel_run(self, run_id: str) -> tuple[Result, list[Sending]]:
        """Cancel a running or waiting run: its unfinished nodes, unsent webhooks and timers."""

        def cancel(ex: Execution, conn: Connection) -> Result:
            result = ex.cancel()
            if result.outcome is Outcome.APPLIED:
                conn.execute(
                    update(outbox).where(outbox.c.run_id == run_id, outbox.c.state == "pending").values(state="skipped")
                )
                conn.execute(delete(timers).where(timers.c.run_id == run_id))
            return result

        return self._event(run_id, cancel, with_connection=True)

    def fire_due(self, limit: int = 100) -> list[Sending]:
        """Apply the timers due by ``clock()``, one transaction per run; the webhooks to send."""
        at = self.clock()
        with self.db.reading() as conn:
            due = conn.execute(
                select(timers.c.id, timers.c.run_id)
                .where(timers.c.due_at <= at)
                .order_by(timers.c.due_at, timers.c.id)
                .limit(limit)
            ).all()
        by_run: dict[str, list[int]] = {}
        for timer_id, run_id in due:
            by_run.setdefault(run_id, []).append(timer_id)
        sendings: list[Sending] = []
        for run_id, ids in by_run.items():

            def fire(ex: Execution, conn: Connection, ids: list[int] = ids) -> Result:
                # Under the run's lock; a timer another process fired meanwhile is gone (or
                # still locked by it, on PostgreSQL: skipped).
                rows = (
                    conn.execute(
                        select(timers)
                        .where(timers.c.id.in_(ids))
                        .order_by(timers.c.due_at, timers.c.id)
                        .with_for_update(skip_locked=True)
                    )
                    .mappings()
                    .all()
                )
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

    def callbacks(self, calls: Sequence[CallbackCall]) -> list[tuple[Result, list[Sending]]]:
        """Several workers' callbacks in one transaction: one commit for all (group commit).

        They go in rounds of at most one callback per run, each round read with one statement
        and written with one statement per table, so a batch costs a few round trips, not a few
        per callback. Runs are locked in run-id order, so two batches (in two server processes)
        never deadlock; callbacks on one run keep their arrival order, one round each. If any
        of them raises, nothing is committed: the caller applies them one by one instead.
        """
        return self._planned(lambda plan_here: self._callbacks(calls, plan_here))

    def _callbacks(self, calls: Sequence[CallbackCall], plan_here: bool) -> list[tuple[Result, list[Sending]]]:
        waiting = sorted(range(len(calls)), key=lambda i: calls[i][0])
        done: dict[int, tuple[Result, list[Sending]]] = {}
        counted: list[tuple[str, Execution, str]] = []  # counted once the transaction committed
        with self.db.transaction() as conn:
            while waiting:
                this_round: dict[str, int] = {}
                later = []
                for i in waiting:
                    if calls[i][0] in this_round:
                        later.append(i)
                    else:
                        this_round[calls[i][0]] = i
                waiting = later
                self._callback_round(
                    conn, [calls[i] for i in this_round.values()], list(this_round.values()), done, counted, plan_here
                )
        for flow_id, execution, status in counted:
            metrics.applied(flow_id, execution, status)
        return [done[i] for i in range(len(calls))]

    def _callback_round(
        self,
        conn: Connection,
        calls: list[CallbackCall],
        ids: list[int],
        done: dict[int, tuple[Result, list[Sending]]],
        counted: list[tuple[str, Execution, str]],
        plan_here: bool,
    ) -> None:
        rows = self.db.hot.read_runs(conn, [call[0] for call in calls if is_uuid(call[0])])
        applied: list[tuple[int, RunRow, str, Execution]] = []
        for i, (run_id, key, attempt, status, output, error) in zip(ids, calls, strict=True):
            row = rows.get(run_id)
            if row is None:
                done[i] = _no_run(run_id), []
                continue
            execution = self._load(conn, run_id, row, plan_here)
            done[i] = execution.callback(key, attempt, status, output, error), []
            if execution.events:
                applied.append((i, row, run_id, execution))
        written = self._write(conn, [(run_id, ex) for _, _, run_id, ex in applied])
        for (i, row, _, execution), run in zip(applied, written, strict=True):
            done[i] = done[i][0], run.sendings
            counted.append((row.flow_id, execution, run.status))

    def _event(self, run_id: str, apply: Any, *, with_connection: bool = False) -> tuple[Result, list[Sending]]:
        """One event on one run, in its own transaction."""
        if not is_uuid(run_id):
            return _no_run(run_id), []
        return self._planned(lambda plan_here: self._one_event(run_id, apply, with_connection, plan_here))

    def _planned(self, work: Callable[[bool], _T]) -> _T:
        """``work`` (one transaction), run again after planning outside it a flow version it met
        that this process had not planned: planning checks the graph's input schemas, which
        never happens while a run is locked (but in the last try, should the plans keep going)."""
        for attempt in range(_CHECKS):
            try:
                return work(attempt == _CHECKS - 1)
            except _Unplanned as unplanned:
                self._plan_apart(unplanned.flow_id, unplanned.version, unplanned.run_id)
        raise AssertionError("the last try plans in its transaction")

    def _plan_apart(self, flow_id: str, version: int, run_id: str) -> None:
        with self.db.reading() as conn:
            plans.planned(flow_id, version, lambda: self.db.hot.read_graph(conn, run_id))

    def _one_event(
        self, run_id: str, apply: Any, with_connection: bool, plan_here: bool
    ) -> tuple[Result, list[Sending]]:
        with self.db.transaction() as conn:
            # Locks the run (FOR UPDATE; SQLite: BEGIN IMMEDIATE).
            row = self.db.hot.read_runs(conn, [run_id]).get(run_id)
            if row is None:
                return _no_run(run_id), []
            execution = self._load(conn, run_id, row, plan_here)
            result = apply(execution, conn) if with_connection else apply(execution)
            if not execution.events:
                return result, []
            written = self._write(conn, [(run_id, execution)])[0]
        metrics.applied(row.flow_id, execution, written.status)
        return result, written.sendings

    def _load(self, conn: Connection, run_id: str, row: RunRow, plan_here: bool) -> Execution:
        hot = self.db.hot
        if not plan_here and not plans.known(row.flow_id, row.flow_version):
            raise _Unplanned(row.flow_id, row.flow_version, run_id)
        plan, _ = plans.planned(row.flow_id, row.flow_version, lambda: hot.read_graph(conn, run_id))
        nodes = NodeStates(
            node_states(row.node_states),
            lambda keys: node_states(hot.read_paths(conn, run_id, keys)),
            lambda: node_states(hot.read_paths(conn, run_id)),
        )
        tally = None if row.tally is None else Tally.from_json(row.tally)
        execution = self._execution(
            RunState(run_id, None, nodes, tally, read_input=lambda: hot.read_input(conn, run_id)), plan
        )
        if tally is None:  # stored before states were kept apart: they move if this event writes
            nodes.changed.update(k for k, s in nodes.at_hand().items() if apart(plan, s))
        return execution

    def _execution(self, run: RunState, plan: Plan) -> Execution:
        return Execution(
            run,
            plan,
            self.signer.callback_url,
            iso(now()),
            at=self.clock(),
            node_timeout=self.node_timeout,
        )

    def _write(
        self, conn: Connection, changed: list[tuple[str, Execution]], stamp: datetime | None = None
    ) -> list[Written]:
        """What events did to their runs (at most one event per run): the run rows, events, attempt
        history, timers and outbox rows, one statement per kind (:mod:`db.hot`). Returns each
        run's webhooks to send and status. ``stamp``: a run just inserted with this time (its row is written)."""
        hot, json_in = self.db.hot, self.db.hot.json_in
        at = hot.stamp(stamp or now())
        statuses = [ex.run_status() for _, ex in changed]
        with hot.pipeline(conn):  # PostgreSQL: one round trip for all of it
            if stamp is None:
                hot.many(
                    conn,
                    "update_run",
                    (
                        (json_in(_row_states(ex.plan, ex.run.nodes)), json_in(ex.tally.to_json()), status, at, run_id)
                        for (run_id, ex), status in zip(changed, statuses, strict=True)
                    ),
                )
            hot.many(
                conn,
                "path",
                (
                    (run_id, key, state.status, json_in(state.to_json()))
                    for run_id, ex in changed
                    for key, state in _apart_changes(ex)
                ),
            )
            hot.many(
                conn,
                "event",
                (
                    (run_id, e.key, e.status, e.attempt, at, e.error, e.summary)
                    for run_id, ex in changed
                    for e in ex.events
                ),
            )
            changes = [(run_id, c) for run_id, ex in changed for c in ex.attempts.values()]
            hot.many(
                conn,
                "attempt",
                (
                    (
                        run_id,
                        c.key,
                        c.attempt,
                        c.status,
                        json_in(c.input),
                        json_in(c.output),
                        c.error,
                        at,
                        at if c.finished else None,
                    )
                    for run_id, c in changes
                    if c.new
                ),
            )
            hot.many(
                conn,
                "end_attempt",
                (
                    (c.status, json_in(c.output), c.error, at if c.finished else None, run_id, c.key, c.attempt)
                    for run_id, c in changes
                    if not c.new
                ),
            )
            hot.many(
                conn, "drop_timer", ((run_id, k, a, kind) for run_id, ex in changed for k, a, kind in ex.timers_done)
            )
            hot.many(
                conn,
                "timer",
                ((run_id, t.key, t.attempt, t.kind, t.due_at) for run_id, ex in changed for t in ex.timers),
            )
            # Leased to this process at once: it sends right after the commit. If it dies first,
            # the lease runs out and the reconciler sends it.
            lease = time.time() + self.lease_seconds
            dispatches = [(run_id, d) for run_id, ex in changed for d in ex.dispatches]
            ids = hot.insert_outbox(
                conn, [(run_id, d.key, d.attempt, d.url, json_in(d.payload), lease, at) for run_id, d in dispatches]
            )
        sendings: dict[str, list[Sending]] = {}
        for run_id, d in dispatches:
            sendings.setdefault(run_id, []).append(
                Sending(ids[(run_id, d.key, d.attempt)], run_id, d.key, d.attempt, d.url, d.payload)
            )
        return [
            Written(sendings.get(run_id, []), status) for (run_id, _), status in zip(changed, statuses, strict=True)
        ]

    # -- delivery bookkeeping --------------------------------------------------------
    def mark_sent(self, sent: Sequence[tuple[Sending, int | None]]) -> None:
        """Webhooks the worker accepted, each with the HTTP status it answered (kept in the
        attempt's history). A cancelled run's rows were skipped: they stay so. Their runs are
        locked first, in id order, as a batch of callbacks locks them (all in its first round):
        a batch ends the attempts of one run in the order its callbacks came, so without the
        run's lock this and a batch could each hold an attempt row the other waits for
        (PostgreSQL ends one of them as a deadlock, after a second of both waiting)."""
        if not sent:
            return
        hot = self.db.hot
        in_order = sorted(sent, key=lambda item: (item[0].run_id, item[0].key, item[0].attempt))
        with self.db.transaction() as conn:
            hot.lock_runs(conn, list({s.run_id for s, _ in in_order}))
            hot.many(conn, "sent", ((s.outbox_id,) for s, _ in in_order))
            hot.many(
                conn,
                "worker_status",
                ((status, s.run_id, s.key, s.attempt) for s, status in in_order if status is not None),
            )

    def renew_leases(self, sendings: Sequence[Sending]) -> None:
        """Webhooks this process is still sending (queued for a connection, waiting for the
        worker, or between re-sends): their leases start again, so no reconciler sends them a
        second time while their sender lives; a send with its re-sends may outlast one lease.
        Rows are updated in the order :meth:`mark_sent` updates them, so the two never deadlock."""
        if not sendings:
            return
        until = time.time() + self.lease_seconds
        in_order = sorted(sendings, key=lambda s: (s.run_id, s.key, s.attempt))
        with self.db.transaction() as conn:
            self.db.hot.many(conn, "renew", ((until, s.outbox_id) for s in in_order))

    def claim_due(self, limit: int = 100, now: float | None = None) -> list[Sending]:
        """Dispatches whose sender died or never started: leased again to this process."""
        rows = self.db.claim_due(time.time() if now is None else now, self.lease_seconds, limit)
        return [_sending(r) for r in rows]

    def pending_dispatches(self) -> int:
        with self.db.reading() as conn:
            return int(
                conn.execute(select(func.count()).select_from(outbox).where(outbox.c.state == "pending")).scalar() or 0
            )

    def backlog(self) -> metrics.Backlog:
        """The outbox rows still pending and the age of the oldest (for a metrics scrape)."""
        with self.db.reading() as conn:
            count, oldest = conn.execute(
                select(func.count(), func.min(outbox.c.created_at)).where(outbox.c.state == "pending")
            ).one()
        if oldest is None:
            return metrics.Backlog(0, 0.0)
        if oldest.tzinfo is None:  # SQLite keeps naive UTC
            oldest = oldest.replace(tzinfo=UTC)
        return metrics.Backlog(int(count), max(0.0, (now() - oldest).total_seconds()))


def apart(plan: Plan, state: NodeState) -> bool:
    """Whether a state is a row of its own (``stitch_paths``) rather than part of the run row:
    a node path on a fan-out, and a Splitter or a Collector (their outputs grow with their arrays)."""
    if state.path is None:
        return False
    return bool(state.path) or plan.kind(state.node_id) in (NodeType.SPLITTER, NodeType.COLLECTOR)


def _row_states(plan: Plan, nodes: NodeStates) -> dict[str, Any]:
    """The states the run row keeps (all of them are read with it, so all are at hand)."""
    return {key: state.to_json() for key, state in nodes.at_hand().items() if not apart(plan, state)}


def _apart_changes(ex: Execution) -> list[tuple[str, NodeState]]:
    nodes = ex.run.nodes.at_hand()
    return [(key, nodes[key]) for key in sorted(ex.run.nodes.changed) if apart(ex.plan, nodes[key])]


def _no_run(run_id: str) -> Result:
    return Result(Outcome.NOT_FOUND, f"no run {run_id}" if is_uuid(run_id) else str(missing("run", run_id)))


def _sending(row: RowMapping) -> Sending:
    return Sending(row["id"], row["run_id"], row["node_key"], row["attempt"], row["url"], row["payload"])
