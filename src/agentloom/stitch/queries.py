"""The read side: runs listed and paged, runs waiting for a person, a node's attempt history,
and the run view (the latest state per node, with prompts and fan-out summaries).

Lists never read ``node_states`` (a run with a wide fan-out holds thousands of entries): the
run list pages on ``(created_at, id)``, newest first, along ``ix_stitch_runs_listing`` or,
with a status, ``ix_stitch_runs_status``, so page 500 costs what page 1 does. The cursor is
opaque to clients: the last run's ``created_at`` (UTC, microseconds) and id.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any, get_args

from pydantic import ValidationError
from sqlalchemy import Connection, Select, select, tuple_

from agentloom.stitch import plans
from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import attempts, events, paths, runs
from agentloom.stitch.execution import template_summary
from agentloom.stitch.graph import GraphError
from agentloom.stitch.ids import NotFound, is_uuid, missing, shown
from agentloom.stitch.models import NodeType, RunStatus, Status
from agentloom.stitch.state import NodeState, node_states

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
WAITING_SCAN = ("waiting_for_user", "running")  # a gate can wait while other branches still run
_LIST_COLUMNS = (runs.c.id, runs.c.flow_id, runs.c.flow_version, runs.c.status, runs.c.created_at, runs.c.updated_at)


class BadQuery(ValueError):
    """A query parameter with a value the server cannot use; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


# -- the run list ------------------------------------------------------------------
def list_runs(
    db: Database, *, status: str | None = None, flow_id: str | None = None, cursor: str | None = None, limit: int = 100
) -> dict[str, Any]:
    """``{"runs": [...], "next_cursor": str | None}``, newest first; ``next_cursor`` is null on the last page."""
    with db.reading() as conn:
        rows = [
            dict(r)
            for r in conn.execute(runs_query(status=status, flow_id=flow_id, cursor=cursor, limit=limit + 1)).mappings()
        ]
    more = len(rows) > limit
    rows = rows[:limit]
    return {"runs": rows, "next_cursor": encode_cursor(rows[-1]["created_at"], rows[-1]["id"]) if more else None}


def runs_query(
    *, status: str | None = None, flow_id: str | None = None, cursor: str | None = None, limit: int = 100
) -> Select[Any]:
    """The page's statement (no node_states; keyset on ``(created_at, id)``, served by the listing indexes)."""
    query = select(*_LIST_COLUMNS)
    if status is not None:
        if status not in RUN_STATUSES:
            raise BadQuery("status", f"unknown run status {shown(status)}; use one of {', '.join(RUN_STATUSES)}")
        query = query.where(runs.c.status == status)
    if flow_id is not None:
        query = query.where(runs.c.flow_id == _flow_id(flow_id))
    if cursor is not None:
        created_at, run_id = decode_cursor(cursor)
        query = query.where(tuple_(runs.c.created_at, runs.c.id) < tuple_(created_at, run_id))
    return query.order_by(runs.c.created_at.desc(), runs.c.id.desc()).limit(limit)


def _flow_id(flow_id: str) -> str:
    if not is_uuid(flow_id):
        raise BadQuery(
            "flow_id", f"{shown(flow_id)} is not a flow id; flow ids are UUIDs, as GET /api/stitch/flows lists them"
        )
    return flow_id.lower()


def encode_cursor(created_at: datetime, run_id: str) -> str:
    moment = _utc(created_at).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return base64.urlsafe_b64encode(f"{moment}|{run_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    problem = BadQuery(
        "cursor",
        f"{shown(cursor)} is not a cursor of this server; pass the next_cursor of the "
        "previous page unchanged, or leave cursor out for the first page",
    )
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        moment, run_id = text.split("|")
        created_at = datetime.strptime(moment, "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise problem from None
    # Only a cursor this server gives out: another spelling of the same moment or id is refused.
    if not is_uuid(run_id) or run_id != run_id.lower() or encode_cursor(created_at, run_id) != cursor:
        raise problem
    return created_at, run_id


def _utc(moment: datetime) -> datetime:
    # SQLite hands back naive UTC; PostgreSQL an aware moment in the session's zone.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# -- one run -------------------------------------------------------------------------
def get_run(db: Database, run_id: str) -> dict[str, Any]:
    """The run as stored, its node states assembled from the run row and ``stitch_paths``."""
    if not is_uuid(run_id):
        raise missing("run", run_id)
    with db.reading() as conn:
        row = conn.execute(select(runs).where(runs.c.id == run_id.lower())).mappings().first()
        if row is None:
            raise missing("run", run_id)
        run = dict(row)
        run["node_states"] = _assembled(conn, run["id"], run["node_states"], run["graph"])
    run.pop("tally", None)
    return run


def _assembled(conn: Connection, run_id: str, kept: dict[str, Any], graph: Any = None) -> dict[str, Any]:
    """A run's node states: those its row keeps and those kept apart, in the graph's node order,
    each node's template first and then its paths in path order."""
    states = dict(kept)
    states.update(
        (key, state) for key, state in conn.execute(select(paths.c.key, paths.c.state).where(paths.c.run_id == run_id))
    )
    order = {n.get("id"): i for i, n in enumerate((graph or {}).get("nodes") or []) if isinstance(n, dict)}

    def place(item: tuple[str, Any]) -> tuple[int, str, int, list[int]]:
        key, state = item
        state = state if isinstance(state, dict) else {}
        node_id, path = str(state.get("node_id", key)), state.get("path")
        return order.get(node_id, len(order)), node_id, path is not None, path if isinstance(path, list) else []

    return dict(sorted(states.items(), key=place))


def get_run_status(db: Database, run_id: str) -> dict[str, Any]:
    """``{id, status}`` of a run (its node states unread); NotFound when there is none."""
    if not is_uuid(run_id):
        raise missing("run", run_id)
    with db.reading() as conn:
        row = conn.execute(select(runs.c.id, runs.c.status).where(runs.c.id == run_id.lower())).mappings().first()
    if row is None:
        raise missing("run", run_id)
    return dict(row)


def run_events(db: Database, run_id: str) -> list[dict[str, Any]]:
    """The run's event log, oldest first (404 for an unknown run, not an empty log)."""
    if not is_uuid(run_id):
        raise missing("run", run_id)
    with db.reading() as conn:
        if conn.execute(select(runs.c.id).where(runs.c.id == run_id.lower())).first() is None:
            raise missing("run", run_id)
        rows = (
            conn.execute(select(events).where(events.c.run_id == run_id.lower()).order_by(events.c.id)).mappings().all()
        )
    return [dict(r) for r in rows]


def run_view(run: dict[str, Any]) -> dict[str, Any]:
    """The run with each node's latest state as shown to people: a waiting UX node carries its
    ``prompt``; a fan-out template entry (``path`` null: ``sq`` of ``sq_0``, ``sq_1``, ...)
    shows the summary of its paths instead of reading ``pending`` forever."""
    states: dict[str, dict[str, Any]] = run.get("node_states") or {}
    prompts = _prompts(run.get("graph"))
    shown_states: dict[str, Any] = {}
    typed: dict[str, NodeState] | None = None  # read once, if the run has a template
    for key, state in states.items():
        if not isinstance(state, dict):
            shown_states[key] = state
            continue
        if state.get("path") is None:
            if typed is None:
                typed = node_states({k: s for k, s in states.items() if isinstance(s, dict)})
            summary = template_summary(typed, state.get("node_id", key))
            shown_states[key] = {**state, "status": summary["status"], "paths": summary["paths"]}
        elif state.get("status") == Status.WAITING_FOR_USER:
            shown_states[key] = {**state, "prompt": prompts.get(state.get("node_id", key))}
        else:
            shown_states[key] = state
    return {**run, "node_states": shown_states}


def _prompts(graph: Any) -> dict[str, str | None]:
    """Each UX node's ``data.prompt`` (text; anything else is shown as its JSON)."""
    found: dict[str, str | None] = {}
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    for node in nodes or []:
        if isinstance(node, dict) and node.get("type") == NodeType.UX:
            prompt = (node.get("data") or {}).get("prompt")
            found[str(node.get("id"))] = prompt if prompt is None or isinstance(prompt, str) else json.dumps(prompt)
    return found


# -- runs waiting for a person -----------------------------------------------------------


def waiting(db: Database, *, flow_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Every UX gate waiting for a person, longest waiting first: ``{run_id, flow_id, node_id,
    prompt, input_schema, since}`` (``node_id`` is the key to complete: ``review_2`` on a
    fan-out path; ``input_schema`` what the completion must fit, or None)."""
    query = select(runs.c.id, runs.c.flow_id, runs.c.flow_version, runs.c.graph, runs.c.node_states).where(
        runs.c.status.in_(WAITING_SCAN)
    )
    if flow_id is not None:
        query = query.where(runs.c.flow_id == _flow_id(flow_id))
    found: list[dict[str, Any]] = []
    # A run keeps the graph of the version it started with: its gates' prompts are read once per
    # flow version, and their schemas are those of the version's plan (checked once per process).
    gates_of: dict[tuple[str, int], tuple[dict[str, str | None], dict[str, dict[str, Any]]]] = {}
    with db.reading() as conn:
        for row in conn.execute(query.order_by(runs.c.created_at, runs.c.id)).mappings():
            # Gates on fan-out paths are rows of their own, found along ix_stitch_paths_waiting.
            apart = conn.execute(
                select(paths.c.key, paths.c.state).where(
                    paths.c.run_id == row["id"], paths.c.status == Status.WAITING_FOR_USER
                )
            ).all()
            gates = [
                (key, state)
                for key, state in [*(row["node_states"] or {}).items(), *apart]
                if state.get("status") == Status.WAITING_FOR_USER and state.get("path") is not None
            ]
            if not gates:
                continue
            version = (row["flow_id"], row["flow_version"])
            if version not in gates_of:
                gates_of[version] = _prompts(row["graph"]), _gate_schemas(version, row["graph"])
            prompts, schemas = gates_of[version]
            found += [
                {
                    "run_id": row["id"],
                    "flow_id": row["flow_id"],
                    "node_id": key,
                    "prompt": prompts.get(state["node_id"]),
                    "input_schema": schemas.get(state["node_id"]),
                    "since": state.get("updated_at"),
                }
                for key, state in gates
            ]
    found.sort(key=lambda gate: (gate["since"] or "", gate["run_id"], gate["node_id"]))
    return found[:limit]


def _gate_schemas(version: tuple[str, int], graph: Any) -> dict[str, dict[str, Any]]:
    """The input schemas a completion of each UX gate is checked against: the plan's (none for a
    stored graph that no longer plans, which no event can run either)."""
    try:
        plan, _ = plans.planned(*version, lambda: graph)
    except (GraphError, ValidationError):
        return {}
    return plan.gate_schemas


# -- attempt history ---------------------------------------------------------------------
def node_attempts(db: Database, run_id: str, key: str) -> list[dict[str, Any]]:
    """Every attempt of a node path, oldest first. A fan-out template key (``sq``) gives the
    attempts of all its paths (each row names its ``node_key``)."""
    if not is_uuid(run_id):
        raise missing("run", run_id)
    with db.reading() as conn:
        kept = conn.execute(select(runs.c.node_states).where(runs.c.id == run_id.lower())).scalar()
        if kept is None:
            raise missing("run", run_id)
        states = _assembled(conn, run_id.lower(), kept)
        state = states.get(key)
        if state is None:
            raise NotFound(f"run {run_id} has no node {shown(key)}; GET /api/stitch/runs/{run_id} lists its nodes")
        keys = (
            [key]
            if state.get("path") is not None
            else [k for k, s in states.items() if s.get("node_id") == key and s.get("path") is not None]
        )
        if not keys:
            return []
        rows = (
            conn.execute(
                select(
                    attempts.c.node_key,
                    attempts.c.attempt,
                    attempts.c.status,
                    attempts.c.input,
                    attempts.c.output,
                    attempts.c.error,
                    attempts.c.worker_status,
                    attempts.c.started_at,
                    attempts.c.finished_at,
                )
                .where(attempts.c.run_id == run_id.lower(), attempts.c.node_key.in_(keys))
                .order_by(attempts.c.started_at, attempts.c.id)
            )
            .mappings()
            .all()
        )
    return [dict(r) for r in rows]
