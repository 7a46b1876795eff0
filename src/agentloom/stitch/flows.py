"""Flows: create, update, read, list and delete the saved graphs (each write one transaction).

A deleted flow is hidden, not removed (``deleted_at``): it is gone from the list and from
reads (404), and no run can start from it, but its runs stay readable, each with its own copy
of the graph it started with. Deleting a flow that still has runs under way (running or
waiting for a person) is refused, naming how many, unless forced: then those runs are
cancelled first, each in its own transaction like any cancel.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import flows, runs
from agentloom.stitch.graph import analyse
from agentloom.stitch.ids import is_uuid, missing
from agentloom.stitch.models import Graph
from agentloom.stitch.webhooks import WebhookPolicy

UNDER_WAY = ("running", "waiting_for_user")  # the run statuses that keep a flow from being deleted
FORCE_ROUNDS = 5  # runs started while a forced delete cancels the others are cancelled in the next round

Cancel = Callable[[str], object]  # Engine.cancel_run: its answer does not matter here (a finished run is fine)


class FlowBusy(RuntimeError):
    """The flow has runs under way; ``count`` says how many."""

    def __init__(self, flow_id: str, count: int) -> None:
        self.count = count
        super().__init__(
            f"flow {flow_id} has {count} run(s) running or waiting_for_user; wait for them, cancel them "
            f"(POST /api/stitch/runs/{{id}}/cancel), or delete with ?force=true, which cancels them"
        )


def _now() -> datetime:
    return datetime.now(UTC)


def _graph_json(graph: Graph) -> dict[str, Any]:
    return graph.model_dump(mode="json", exclude_none=True)


_LIVE = flows.c.deleted_at.is_(None)
_COLUMNS = (flows.c.id, flows.c.name, flows.c.graph, flows.c.version, flows.c.created_at, flows.c.updated_at)
_LAST_RUN = (
    select(runs.c.id, runs.c.status, runs.c.created_at)
    .where(runs.c.flow_id == bindparam("flow"))
    .order_by(runs.c.created_at.desc(), runs.c.id.desc())
    .limit(1)
)  # along ix_stitch_runs_flow_listing


class Flows:
    def __init__(self, db: Database, webhooks: WebhookPolicy | None = None) -> None:
        self.db = db
        self.webhooks = webhooks or WebhookPolicy()

    def create(self, name: str, graph: Graph) -> dict[str, Any]:
        analyse(graph, self.webhooks)  # raises GraphError naming every problem, before anything is written
        stamp = _now()
        row = {
            "id": str(uuid.uuid4()),
            "name": name,
            "graph": _graph_json(graph),
            "version": 1,
            "created_at": stamp,
            "updated_at": stamp,
        }
        with self.db.transaction() as conn:
            conn.execute(insert(flows).values(**row))
        return row

    def update(self, flow_id: str, name: str | None, graph: Graph | None) -> dict[str, Any]:
        """A new version (running runs keep the graph they started with)."""
        if graph is not None:
            analyse(graph, self.webhooks)
        with self.db.transaction() as conn:
            row = self._locked(conn, flow_id)
            values: dict[str, Any] = {"updated_at": _now(), "version": row["version"] + 1}
            if name is not None:
                values["name"] = name
            if graph is not None:
                values["graph"] = _graph_json(graph)
            conn.execute(update(flows).where(flows.c.id == row["id"]).values(**values))
            return {**row, **values}

    def get(self, flow_id: str) -> dict[str, Any]:
        if not is_uuid(flow_id):
            raise missing("flow", flow_id)
        with self.db.reading() as conn:
            row = conn.execute(select(*_COLUMNS).where(flows.c.id == flow_id.lower(), _LIVE)).mappings().first()
        if row is None:
            raise missing("flow", flow_id)
        return dict(row)

    def list(self) -> list[dict[str, Any]]:
        """Every live flow, oldest first, with its ``node_count`` and ``last_run`` (``{id,
        status, created_at}`` or None; one indexed lookup per flow)."""
        with self.db.reading() as conn:
            rows = (
                conn.execute(select(*_COLUMNS).where(_LIVE).order_by(flows.c.created_at, flows.c.id)).mappings().all()
            )
            listed = []
            for row in rows:
                last = conn.execute(_LAST_RUN, {"flow": row["id"]}).mappings().first()
                nodes = row["graph"].get("nodes") if isinstance(row["graph"], dict) else None
                listed.append({**row, "node_count": len(nodes or []), "last_run": dict(last) if last else None})
        return listed

    def delete(self, flow_id: str, *, force: bool = False, cancel: Cancel | None = None) -> dict[str, Any]:
        """Hide the flow. Refused (:class:`FlowBusy`) while runs are under way, unless ``force``:
        then ``cancel`` (Engine.cancel_run) cancels each first. Returns ``{id, deleted_at,
        cancelled_runs}``."""
        if force and cancel is None:
            raise ValueError("a forced delete needs the engine's cancel_run")
        cancelled = 0
        for _ in range(FORCE_ROUNDS):
            with self.db.transaction() as conn:
                row = self._locked(conn, flow_id)
                busy = self._under_way(conn, row["id"])
                if not busy:
                    stamp = _now()
                    conn.execute(update(flows).where(flows.c.id == row["id"]).values(deleted_at=stamp))
                    return {"id": row["id"], "deleted_at": stamp, "cancelled_runs": cancelled}
                if not force:
                    raise FlowBusy(row["id"], len(busy))
            # Outside the flow's transaction: each cancel locks its run, as every writer does
            # (run first), so a cancel never waits on a lock this delete holds.
            for run_id in busy:
                assert cancel is not None
                cancel(run_id)
            cancelled += len(busy)
        raise FlowBusy(flow_id, len(busy))  # runs kept starting faster than they were cancelled

    def _locked(self, conn: Connection, flow_id: str) -> dict[str, Any]:
        if not is_uuid(flow_id):
            raise missing("flow", flow_id)
        row = (
            conn.execute(select(*_COLUMNS).where(flows.c.id == flow_id.lower(), _LIVE).with_for_update())
            .mappings()
            .first()
        )
        if row is None:
            raise missing("flow", flow_id)
        return dict(row)

    @staticmethod
    def _under_way(conn: Connection, flow_id: str) -> Sequence[str]:  # (``list`` here is Flows.list)
        query = select(runs.c.id).where(runs.c.flow_id == flow_id, runs.c.status.in_(UNDER_WAY))
        return list(conn.execute(query).scalars())
