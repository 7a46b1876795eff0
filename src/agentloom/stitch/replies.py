"""What the Stitch API answers: one typed model per reply (they are the OpenAPI schemas), the
error replies each endpoint documents, and :func:`as_reply`, which puts every moment in the
one timestamp format (RFC 3339, UTC, milliseconds, ``Z``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from agentloom.core.timestamps import iso, parse
from agentloom.stitch.models import RunStatus, Status

Moment = Annotated[
    str,
    Field(
        description="RFC 3339 in UTC with milliseconds, e.g. 2026-11-23T11:32:00.123Z.",
        json_schema_extra={"format": "date-time", "examples": ["2026-11-23T11:32:00.123Z"]},
    ),
]
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
STAMPS = ("created_at", "updated_at", "at", "deleted_at", "started_at", "finished_at", "since")


# -- flows -----------------------------------------------------------------------------------
class FlowReply(BaseModel):
    """A saved flow."""

    id: str = Field(description="The flow's id (a UUID).")
    name: str
    graph: dict[str, Any] = Field(
        description="The React Flow graph: {nodes: [{id, type, data, ...}], edges: [{id, source, target}]}."
    )
    version: int = Field(description="Starts at 1; every update adds 1. A run keeps the version it started with.")
    created_at: Moment
    updated_at: Moment


class GraphProblem(BaseModel):
    """Something wrong with a graph (or, as a warning, most likely not meant), and where."""

    rule: str = Field(description="The rule it breaks, such as 'dangling_edge', 'cycle' or 'worker_webhook'.")
    message: str = Field(description="What is wrong and how to fix it.")
    node_id: str | None = Field(description="The node it concerns; null when it concerns no one node.")
    edge_id: str | None = Field(description="The edge it concerns; null when it concerns no one edge.")
    field: str | None = Field(
        description="The field: a key of the node's data (webhookUrl, inputSchema, ...), or the node's or "
        "edge's own key (id, type, position, source, target); null when the whole node or edge is meant."
    )


class GraphCheck(BaseModel):
    """What saving the graph would find, without saving it."""

    valid: bool = Field(description="True when there are no problems: the graph can be saved as it is.")
    problems: list[GraphProblem] = Field(description="Every problem; saving refuses the graph with a 422 naming them.")
    warnings: list[GraphProblem] = Field(
        description="What is allowed but most likely not meant (a Splitter whose paths no Collector gathers, a "
        "node connected to nothing); saving is not refused for them."
    )


class FlowVersionListed(BaseModel):
    """A kept version of a flow."""

    version: int
    name: str
    author: str | None = Field(description="Who saved it (the author sent with the save); null when unknown.")
    created_at: Moment
    node_count: int
    edge_count: int


class FlowVersion(BaseModel):
    """A kept version of a flow, with its graph as it was saved."""

    flow_id: str
    version: int
    name: str
    author: str | None = Field(description="Who saved it; null when unknown.")
    created_at: Moment
    graph: dict[str, Any]


class ChangedPart(BaseModel):
    id: str
    fields: list[str] = Field(
        description="The keys that changed: the node's or edge's own (type, label, ...), or data.KEY for a key of "
        "its data (data.webhookUrl)."
    )


class NodesDiff(BaseModel):
    added: list[str] = Field(description="Ids of the nodes only the later version has.")
    removed: list[str] = Field(description="Ids of the nodes only the earlier version has.")
    changed: list[ChangedPart] = Field(description="Nodes in both whose keys other than the position differ.")
    moved: list[str] = Field(description="Nodes in both whose position differs.")


class EdgesDiff(BaseModel):
    added: list[str]
    removed: list[str]
    changed: list[ChangedPart]


class FlowDiff(BaseModel):
    """What changed from one version of a flow's graph to another; nodes and edges matched by id."""

    model_config = ConfigDict(populate_by_name=True)
    from_: int = Field(alias="from", description="The earlier version asked for.")
    to: int = Field(description="The later version asked for.")
    nodes: NodesDiff
    edges: EdgesDiff


class LastRun(BaseModel):
    id: str
    status: RunStatus
    created_at: Moment


class FlowListed(FlowReply):
    """A flow in the list, with what a person scans for."""

    node_count: int = Field(description="How many nodes its graph has.")
    last_run: LastRun | None = Field(description="Its newest run; null when it never ran.")


class FlowDeleted(BaseModel):
    """A deleted flow: hidden from lists and reads; its runs stay readable."""

    id: str
    deleted_at: Moment
    cancelled_runs: int = Field(description="Runs cancelled first (only with ?force=true).")


# -- runs -----------------------------------------------------------------------------------
class NodeStateReply(BaseModel):
    """The latest state of one node path (``review``, or ``work_3`` on a fan-out path)."""

    status: Status
    node_id: str = Field(description="The graph node this entry belongs to.")
    path: list[int] | None = Field(
        None,
        description="Which fan-out path ([] outside any fan-out). Null for a fan-out template entry "
        "(``work`` of ``work_0``, ``work_1``, ...), whose status and ``paths`` sum up its paths.",
    )
    attempt: int = Field(0, description="The latest attempt's number (0: never fired); GET .../attempts has every one.")
    input: Any = None
    output: Any = None
    error: str | None = None
    fanout: int | None = Field(None, description="A completed Splitter: how many paths it opened.")
    prompt: str | None = Field(None, description="A UX node waiting for a person: its data.prompt.")
    paths: dict[str, int] | None = Field(
        None, description="A fan-out template entry: how many of its paths are in each status."
    )
    updated_at: Moment | None = None


class RunReply(BaseModel):
    """A run with the latest state of every node path."""

    id: str = Field(description="The run's id (a UUID).")
    flow_id: str
    flow_version: int = Field(description="The flow version the run started with (its graph is kept with the run).")
    status: RunStatus
    input: Any = None
    graph: dict[str, Any] = Field(description="The graph the run started with; later flow edits never change it.")
    node_states: dict[str, NodeStateReply]
    created_at: Moment
    updated_at: Moment


class RunSummary(BaseModel):
    """A run in a list (no node states: see GET /api/stitch/runs/{run_id})."""

    id: str
    flow_id: str
    flow_version: int
    status: RunStatus
    created_at: Moment
    updated_at: Moment


class Retention(BaseModel):
    """How long this server keeps finished runs (completed, failed, cancelled); running and
    waiting runs are always kept."""

    max_age_hours: float | None = Field(description="Finished runs older than this are pruned; null: no age limit.")
    max_runs_per_flow: int | None = Field(
        description="Only this many of a flow's newest finished runs are kept; null: no limit."
    )


class RunPage(BaseModel):
    """One page of runs, newest first."""

    runs: list[RunSummary]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on the last page.")
    retention: Retention | None = Field(
        description="How long finished runs are kept (STITCH_RETENTION_*); null: kept forever."
    )


class WaitingGate(BaseModel):
    """A UX node waiting for a person (complete it with POST /api/stitch/complete/{run_id}/{node_id})."""

    run_id: str
    flow_id: str
    node_id: str = Field(description="The node path to complete (``review_2`` on a fan-out path).")
    prompt: str | None = Field(description="The UX node's data.prompt; null when it has none.")
    input_schema: dict[str, Any] | None = Field(
        description="The UX node's data.inputSchema (JSON Schema): what the completion must fit, drawn as a form "
        "by the console; null when it has none."
    )
    since: Moment | None = Field(description="When it started waiting.")


class AttemptReply(BaseModel):
    """One attempt of a node path."""

    node_key: str = Field(description="The node path (``work_3``); a template key lists all its paths' attempts.")
    attempt: int
    status: str = Field(description="How the attempt ended (running or waiting_for_user while it is under way).")
    input: Any = None
    output: Any = None
    error: str | None = None
    worker_status: int | None = Field(None, description="The HTTP status the worker answered the webhook with.")
    started_at: Moment
    finished_at: Moment | None = None


class EventReply(BaseModel):
    """What an event on a run did (a callback, a completion, a retry, a cancel)."""

    ok: bool = Field(description="True when it was applied, or was a harmless repeat.")
    detail: str
    duplicate: bool = Field(description="True when it repeated one already applied: nothing changed.")


class RunEvent(BaseModel):
    """One entry of a run's event log, oldest first."""

    id: int
    run_id: str
    node_key: str
    status: str
    attempt: int
    at: Moment
    error: str | None = Field(None, description="The node's error, bounded.")
    summary: str | None = Field(None, description="A bounded excerpt of the output's JSON.")


class Health(BaseModel):
    status: str
    database: str = Field(description="sqlite or postgresql.")
    schema_version: int
    pending_dispatches: int = Field(description="Webhooks committed but not yet accepted by their workers.")


# -- errors ---------------------------------------------------------------------------------
class Problem(BaseModel):
    loc: list[str | int] = Field(description="Where: ['query', 'status'], ['body', 'graph'], ...")
    msg: str
    type: str
    rule: str | None = Field(
        None,
        description="For a graph problem (type 'graph'): the rule it breaks, such as "
        "'dangling_edge', 'cycle' or 'webhook_target'.",
    )
    node_id: str | None = Field(None, description="For a graph problem: the node it concerns, when one does.")
    edge_id: str | None = Field(None, description="For a graph problem: the edge it concerns, when one does.")
    field: str | None = Field(None, description="For a graph problem: the node's or edge's field, when one is meant.")


class ErrorReply(BaseModel):
    detail: str = Field(description="What went wrong and how to fix it.")


class ProblemsReply(BaseModel):
    detail: list[Problem] = Field(description="Every problem found, each naming its field.")


ERRORS: dict[int, tuple[type[BaseModel], str]] = {
    400: (ErrorReply, "Not possible in the node's state (for example, retrying a node that has not failed)."),
    401: (ErrorReply, "Missing or wrong API key (send 'Authorization: Bearer <STITCH_API_KEY>')."),
    403: (ErrorReply, "The callback URL is not signed by this server."),
    404: (ErrorReply, "No such flow, run, node or flow version."),
    409: (
        ErrorReply,
        "Conflicts with the current state (a late callback, a finished run, a flow with runs under way).",
    ),
    413: (ErrorReply, "The request body is larger than STITCH_MAX_BODY_BYTES."),
    415: (ErrorReply, "The body is not JSON."),
    422: (
        ProblemsReply,
        "A field, query parameter or value is invalid, or a query parameter is unknown; each problem is named.",
    ),
    503: (ErrorReply, "The database is unavailable or busy; try again shortly."),
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of an endpoint: each status it may answer besides success."""
    return {code: {"model": ERRORS[code][0], "description": ERRORS[code][1]} for code in sorted(set(codes))}


# -- moments --------------------------------------------------------------------------------
def as_reply(row: Mapping[str, Any]) -> dict[str, Any]:
    """A flow, run, event or attempt row as a reply: every moment in the one format
    (``2026-11-23T11:32:00.123Z``), whatever the database returned (SQLite: naive UTC;
    PostgreSQL: the session's zone), node states' ``updated_at`` included (runs saved by
    older versions hold other ISO 8601 forms). The user's data is never rewritten."""
    out = dict(row)
    for key in STAMPS:
        value = out.get(key)
        if isinstance(value, datetime):
            out[key] = iso(value)
        elif key == "since" and isinstance(value, str):
            out[key] = _moment(value)
    states = out.get("node_states")
    if isinstance(states, dict):
        out["node_states"] = {key: _state(value) for key, value in states.items()}
    return out


def as_replies(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [as_reply(row) for row in rows]


def _state(state: Any) -> Any:
    stamp = state.get("updated_at") if isinstance(state, dict) else None
    if not isinstance(stamp, str):
        return state
    return {**state, "updated_at": _moment(stamp)}


def _moment(text: str) -> str:
    if ISO.fullmatch(text):  # already in the one format (as this version writes it): a run's paths are many
        return text
    try:
        return iso(parse(text))
    except ValueError:
        return text  # shown as it is, never an error
