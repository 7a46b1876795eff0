"""Stitch's operations: each one transaction, serialised per run, with its webhooks in the outbox.

No run state is kept in memory: every event reads the run from the database under a lock,
applies :mod:`execution`, and writes states, events and outbox rows in the same commit.
(The parsed graph is cached per flow version; it is derived from the database, never state.)
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, insert, select, update

from agentloom.core.timestamps import iso
from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import events, flows, outbox, runs
from agentloom.stitch.execution import (
    Dispatch,
    Execution,
    Outcome,
    Result,
    initial_states,
)
from agentloom.stitch.graph import Plan, analyse
from agentloom.stitch.ids import is_uuid, shown
from agentloom.stitch.models import Graph
from agentloom.stitch.signing import Signer
from agentloom.stitch.webhooks import WebhookPolicy

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


class NotFound(LookupError):
    pass


def _missing(kind: str, value: str) -> str:
    # Only UUIDs ever reach the database: anything else (NUL characters, surrogates, ...) is
    # unknown on both databases alike instead of an error on one of them.
    return f"no {kind} {value}" if is_uuid(value) else f"no {kind} {shown(value)} ({kind} ids are UUIDs)"


def now() -> datetime:
    return datetime.now(UTC)


class Engine:
    def __init__(self, db: Database, base_url: str, secret: str | None = None, lease_seconds: float = LEASE_SECONDS,
                 webhooks: WebhookPolicy | None = None) -> None:
        self.db = db
        self.lease_seconds = lease_seconds
        self.webhooks = webhooks or WebhookPolicy()
        self.signer = Signer(secret or db.setting("callback_secret") or "", base_url)

    # -- flows -------------------------------------------------------------------
    def create_flow(self, name: str, graph: Graph) -> dict[str, Any]:
        analyse(graph, self.webhooks)  # raises GraphError naming every problem
        stamp = now()
        row = {"id": str(uuid.uuid4()), "name": name, "graph": _graph_json(graph), "version": 1,
               "created_at": stamp, "updated_at": stamp}
        with self.db.transaction() as conn:
            conn.execute(insert(flows).values(**row))
        return row

    def update_flow(self, flow_id: str, name: str | None, graph: Graph | None) -> dict[str, Any]:
        if graph is not None:
            analyse(graph, self.webhooks)
        if not is_uuid(flow_id):
            raise NotFound(_missing("flow", flow_id))
        with self.db.transaction() as conn:
            row = conn.execute(select(flows).where(flows.c.id == flow_id).with_for_update()).mappings().first()
            if row is None:
                raise NotFound(f"no flow {flow_id}")
            values: dict[str, Any] = {"updated_at": now(), "version": row["version"] + 1}
            if name is not None:
                values["name"] = name
            if graph is not None:
                values["graph"] = _graph_json(graph)
            conn.execute(update(flows).where(flows.c.id == flow_id).values(**values))
            return {**row, **values}

    def get_flow(self, flow_id: str) -> dict[str, Any]:
        if not is_uuid(flow_id):
            raise NotFound(_missing("flow", flow_id))
        with self.db.reading() as conn:
            row = conn.execute(select(flows).where(flows.c.id == flow_id)).mappings().first()
        if row is None:
            raise NotFound(f"no flow {flow_id}")
        return dict(row)

    def list_flows(self) -> list[dict[str, Any]]:
        with self.db.reading() as conn:
            rows = conn.execute(select(flows).order_by(flows.c.created_at)).mappings().all()
        return [dict(r) for r in rows]

    # -- runs --------------------------------------------------------------------
    def start_run(self, flow_id: str, run_input: Any) -> tuple[dict[str, Any], list[Sending]]:
        if not is_uuid(flow_id):
            raise NotFound(_missing("flow", flow_id))
        with self.db.transaction() as conn:
            flow = conn.execute(select(flows).where(flows.c.id == flow_id)).mappings().first()
            if flow is None:
                raise NotFound(f"no flow {flow_id}")
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

    def get_run(self, run_id: str) -> dict[str, Any]:
        if not is_uuid(run_id):
            raise NotFound(_missing("run", run_id))
        with self.db.reading() as conn:
            row = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().first()
        if row is None:
            raise NotFound(f"no run {run_id}")
        return dict(row)

    def list_runs(self, flow_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        query = select(runs.c.id, runs.c.flow_id, runs.c.status, runs.c.created_at, runs.c.updated_at)
        if flow_id is not None:
            if not is_uuid(flow_id):
                return []
            query = query.where(runs.c.flow_id == flow_id)
        with self.db.reading() as conn:
            rows = conn.execute(query.order_by(runs.c.created_at.desc()).limit(limit)).mappings().all()
        return [dict(r) for r in rows]

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        if not is_uuid(run_id):
            return []
        with self.db.reading() as conn:
            rows = conn.execute(select(events).where(events.c.run_id == run_id).order_by(events.c.id)).mappings().all()
        return [dict(r) for r in rows]

    # -- events on a run -----------------------------------------------------------
    def callback(self, run_id: str, key: str, attempt: int, status: str, output: Any, error: str | None) -> tuple[Result, list[Sending]]:
        return self._event(run_id, lambda ex: ex.callback(key, attempt, status, output, error))

    def complete(self, run_id: str, key: str, output: Any) -> tuple[Result, list[Sending]]:
        return self._event(run_id, lambda ex: ex.complete(key, output))

    def retry(self, run_id: str, key: str) -> tuple[Result, list[Sending]]:
        return self._event(run_id, lambda ex: ex.retry(key))

    def dispatch_failed(self, outbox_id: int, run_id: str, key: str, attempt: int, reason: str) -> tuple[Result, list[Sending]]:
        def fail(ex: Execution, conn: Connection) -> Result:
            conn.execute(update(outbox).where(outbox.c.id == outbox_id).values(state="failed", last_error=reason))
            return ex.dispatch_failed(key, attempt, reason)

        return self._event(run_id, fail, with_connection=True)

    def _event(self, run_id: str, apply: Any, *, with_connection: bool = False) -> tuple[Result, list[Sending]]:
        if not is_uuid(run_id):
            return Result(Outcome.NOT_FOUND, _missing("run", run_id)), []
        with self.db.locked_run(run_id) as (conn, row):
            if row is None:
                return Result(Outcome.NOT_FOUND, f"no run {run_id}"), []
            plan = _plan(row["flow_id"], row["flow_version"], row["graph"])
            execution = self._execution(run_id, plan, dict(row["node_states"]), row["input"])
            result = apply(execution, conn) if with_connection else apply(execution)
            if not execution.events:
                return result, []
            stamp = now()
            conn.execute(
                update(runs).where(runs.c.id == run_id).values(
                    node_states=execution.states, status=execution.run_status(), updated_at=stamp
                )
            )
            return result, self._record(conn, run_id, execution, stamp)

    def _execution(self, run_id: str, plan: Plan, states: dict[str, Any], run_input: Any) -> Execution:
        return Execution(run_id, plan, states, run_input, self.signer.callback_url, iso(now()))

    def _record(self, conn: Connection, run_id: str, execution: Execution, stamp: datetime) -> list[Sending]:
        if execution.events:
            conn.execute(insert(events), [
                {"run_id": run_id, "node_key": k, "status": s, "attempt": a, "at": stamp} for k, s, a in execution.events
            ])
        return [self._enqueue(conn, run_id, d, stamp) for d in execution.dispatches]

    def _enqueue(self, conn: Connection, run_id: str, dispatch: Dispatch, stamp: datetime) -> Sending:
        # Leased to this process at once: it sends right after the commit. If it dies first,
        # the lease runs out and the reconciler sends it.
        outbox_id = conn.execute(
            insert(outbox).values(
                run_id=run_id, node_key=dispatch.key, attempt=dispatch.attempt, url=dispatch.url,
                payload=dispatch.payload, state="pending", lease_until=time.time() + self.lease_seconds, tries=1,
                created_at=stamp,
            ).returning(outbox.c.id)
        ).scalar_one()
        return Sending(outbox_id, run_id, dispatch.key, dispatch.attempt, dispatch.url, dispatch.payload)

    # -- delivery bookkeeping --------------------------------------------------------
    def mark_sent(self, outbox_ids: list[int]) -> None:
        if outbox_ids:
            with self.db.transaction() as conn:
                conn.execute(update(outbox).where(outbox.c.id.in_(outbox_ids)).values(state="sent"))

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


def _graph_json(graph: Graph) -> dict[str, Any]:
    return graph.model_dump(mode="json", exclude_none=True)


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
