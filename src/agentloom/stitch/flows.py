"""Flows: create, update, read, list and delete the saved graphs (each write one transaction),
and read their versions.

A graph is saved as it was sent, key for key (React Flow's own keys, ``viewport`` and the
like included), once :func:`checks.check` found no problem in it; it is the same check
``POST /flows/validate`` answers with. Creating a flow keeps its version 1, and every update
that changes its graph or its name keeps the next version, in the same transaction as the
flow row; an update that changes neither keeps nothing and answers the flow as it is.

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

from agentloom.stitch import checks
from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import flow_versions, flows, runs
from agentloom.stitch.graph import GraphError
from agentloom.stitch.ids import NotFound, is_uuid, missing
from agentloom.stitch.models import Graph
from agentloom.stitch.versions import diff, same_json
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


def graph_json(graph: Graph | Any) -> Any:
    """A graph as JSON: a model with the keys it was given only (nothing filled in by defaults)."""
    return graph.model_dump(mode="json", exclude_unset=True) if isinstance(graph, Graph) else graph


_LIVE = flows.c.deleted_at.is_(None)
_VERSION_COLUMNS = (flow_versions.c.version, flow_versions.c.name, flow_versions.c.author, flow_versions.c.created_at)
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

    def check(self, graph: Graph | Any) -> checks.Verdict:
        """Every problem and warning of a graph (JSON, or a model), as saving it would find them."""
        return checks.check(graph_json(graph), self.webhooks)

    def _checked(self, graph: Graph | Any) -> Any:
        verdict = self.check(graph)
        if verdict.problems:
            raise GraphError(verdict.problems)  # naming every problem, before anything is written
        return verdict.graph

    def create(self, name: str, graph: Graph | Any, author: str | None = None) -> dict[str, Any]:
        source = self._checked(graph)
        stamp = _now()
        row = {
            "id": str(uuid.uuid4()),
            "name": name,
            "graph": source,
            "version": 1,
            "created_at": stamp,
            "updated_at": stamp,
        }
        with self.db.transaction() as conn:
            conn.execute(insert(flows).values(**row))
            _keep_version(conn, row, author)
        return row

    def update(
        self, flow_id: str, name: str | None, graph: Graph | Any | None, author: str | None = None
    ) -> dict[str, Any]:
        """A new version when the name or the graph changes (running runs keep the graph they
        started with)."""
        source = self._checked(graph) if graph is not None else None
        with self.db.transaction() as conn:
            row = self._locked(conn, flow_id)
            values: dict[str, Any] = {}
            if name is not None and name != row["name"]:
                values["name"] = name
            if source is not None and not same_json(source, row["graph"]):
                values["graph"] = source
            if not values:
                return row
            values.update(updated_at=_now(), version=row["version"] + 1)
            conn.execute(update(flows).where(flows.c.id == row["id"]).values(**values))
            changed = {**row, **values}
            _keep_version(conn, changed, author)
            return changed

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

    def versions(self, flow_id: str) -> Sequence[dict[str, Any]]:  # (``list`` here is Flows.list)
        """The flow's kept versions, newest first: ``{version, name, author, created_at,
        node_count, edge_count}`` (a deleted flow's read as missing, like the flow)."""
        dialect = self.db.dialect
        query = (
            select(
                *_VERSION_COLUMNS,
                dialect.array_length(flow_versions.c.graph, "nodes").label("node_count"),
                dialect.array_length(flow_versions.c.graph, "edges").label("edge_count"),
            )
            .where(flow_versions.c.flow_id == bindparam("flow"))
            .order_by(flow_versions.c.version.desc())
        )
        with self.db.reading() as conn:
            live = self._live(conn, flow_id)
            return [dict(row) for row in conn.execute(query, {"flow": live}).mappings()]

    def version(self, flow_id: str, version: int) -> dict[str, Any]:
        """One kept version: ``{flow_id, version, name, author, created_at, graph}``."""
        with self.db.reading() as conn:
            live = self._live(conn, flow_id)
            row = self._version(conn, live, version)
        return {"flow_id": live, **row}

    def diff(self, flow_id: str, before: int, after: int) -> dict[str, Any]:
        """What changed from version ``before`` to version ``after`` (:func:`.versions.diff`)."""
        with self.db.reading() as conn:
            live = self._live(conn, flow_id)
            old, new = self._version(conn, live, before), self._version(conn, live, after)
        renamed = [old["name"], new["name"]] if old["name"] != new["name"] else []
        return {"from": before, "to": after, "name": renamed, **diff(old["graph"], new["graph"])}

    def _live(self, conn: Connection, flow_id: str) -> str:
        """The flow's id as stored, or NotFound when there is no such flow (or it was deleted)."""
        if not is_uuid(flow_id):
            raise missing("flow", flow_id)
        found = conn.execute(select(flows.c.id).where(flows.c.id == flow_id.lower(), _LIVE)).scalar()
        if found is None:
            raise missing("flow", flow_id)
        return str(found)

    @staticmethod
    def _version(conn: Connection, flow_id: str, version: int) -> dict[str, Any]:
        where = (flow_versions.c.flow_id == flow_id, flow_versions.c.version == version)
        row = conn.execute(select(*_VERSION_COLUMNS, flow_versions.c.graph).where(*where)).mappings().first()
        if row is None:
            kept = conn.execute(
                select(flow_versions.c.version)
                .where(flow_versions.c.flow_id == flow_id)
                .order_by(flow_versions.c.version)
            ).scalars()
            raise NotFound(f"flow {flow_id} has no version {version}; its versions are {_spans(list(kept))}")
        return dict(row)

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


def _keep_version(conn: Connection, row: dict[str, Any], author: str | None) -> None:
    conn.execute(
        insert(flow_versions).values(
            flow_id=row["id"],
            version=row["version"],
            name=row["name"],
            graph=row["graph"],
            author=author,
            created_at=row["updated_at"],
        )
    )


def _spans(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` as ``1 to 3, 5`` (a flow kept since before versions were kept starts late)."""
    if not numbers:
        return "none"
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a} to {b}" for a, b in spans)
