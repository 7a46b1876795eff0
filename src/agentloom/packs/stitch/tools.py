"""MCP tools for Stitch: create and list flows, start, list and cancel runs, read a run's
status, list the gates waiting for a person, complete a UX gate, retry a node.

They call the Stitch HTTP API (``agentloom stitch serve``), which owns the database and
receives the workers' callbacks; answers are kept small for the model's context. Arguments
are checked before any request (:mod:`.client`), and every refusal of the server is a tool
error (``isError: true``) carrying its reason.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError
from agentloom.core.health import Check
from agentloom.core.timestamps import iso, parse
from agentloom.packs.stitch import client
from agentloom.packs.stitch.client import StitchClient, StitchPackSettings
from agentloom.server.packs import Pack, PackContext, reply_of
from agentloom.stitch.models import RunStatus as RunState

pack: Pack[StitchClient] = Pack(
    "stitch",
    "Run React Flow workflows on a Stitch server: save flows, start, follow, list and cancel runs, answer gates, retry",
    requires=["httpx"],
    cli="agentloom.packs.stitch.cli:app",
)


class FlowSummary(TypedDict):
    id: str
    name: str
    version: int
    nodes: int
    updated_at: str  # e.g. 2026-11-23T11:32:00.123Z


class FlowList(TypedDict):
    flows: list[FlowSummary]


class CreatedFlow(TypedDict):
    id: str
    name: str
    version: int
    nodes: int


class NodeSummary(TypedDict, total=False):
    status: str
    output: Any
    error: str
    prompt: str  # a UX node waiting for a person: what to ask them
    input_schema: dict[str, Any]  # a waiting UX node: what stitch_complete's output must fit
    paths: dict[str, int]  # a node on fan-out paths: how many paths are in each status


class RunStatus(TypedDict):
    run_id: str
    flow_id: str
    status: str
    nodes: dict[str, NodeSummary]


@with_config(ConfigDict(json_schema_extra=reply_of("stitch_run_status")))
class RunStarted(RunStatus):
    pass


class RunSummary(TypedDict):
    run_id: str
    flow_id: str
    status: str
    created_at: str


class RunList(TypedDict):
    runs: list[RunSummary]
    next_cursor: str | None  # pass it back as cursor for the next page; null on the last one


class WaitingGate(TypedDict):
    run_id: str
    node_id: str  # what stitch_complete takes (review_2 on a fan-out path)
    prompt: str | None
    input_schema: dict[str, Any] | None  # what the output must fit (JSON Schema, compact); null: anything


class WaitingList(TypedDict):
    gates: list[WaitingGate]


class Done(TypedDict):
    run_id: str
    node_id: str
    detail: str


@with_config(ConfigDict(json_schema_extra=reply_of("stitch_complete")))
class Retried(Done):
    pass


class Cancelled(TypedDict):
    run_id: str
    detail: str
    duplicate: NotRequired[bool]  # the run was cancelled already: nothing changed


@pack.setup
def setup(ctx: PackContext) -> StitchClient:
    """The client to the configured Stitch server, behind the shared breakers."""
    return StitchClient(ctx.config(StitchPackSettings), ctx.breakers)


@pack.health
def health(stitch: StitchClient) -> list[Check]:
    settings = stitch.settings
    try:
        body = stitch.call("GET", "/health")
        return [Check("stitch server", True, f"{settings.url}: {body['database']}", required=False)]
    except AgentloomError as exc:  # optional: the other packs work without a Stitch server
        if "url" not in settings.model_fields_set:  # nobody asked for one: not running is not a fault
            return [
                Check(
                    "stitch server",
                    True,
                    f"none at the default {settings.url} (start one with `agentloom stitch serve`)",
                )
            ]
        return [Check("stitch server", False, str(exc), required=False)]


@pack.tool(read_only=True, open_world=True)
def stitch_list_flows(stitch: StitchClient) -> FlowList:
    """The flows on the Stitch server."""
    flows = stitch.call("GET", "/flows")
    return {
        "flows": [
            {
                "id": f["id"],
                "name": f["name"],
                "version": f["version"],
                "nodes": len(f["graph"]["nodes"]),
                "updated_at": _moment(f["updated_at"]),
            }
            for f in flows
        ]
    }


@pack.tool(open_world=True)
def stitch_create_flow(
    stitch: StitchClient,
    name: Annotated[str, Field(min_length=1, max_length=200)],
    graph: Annotated[
        dict[str, Any],
        Field(
            description=(
                "The React Flow graph: {nodes: [{id, type: Worker|UX|Splitter|Collector, data}], "
                "edges: [{id, source, target}]}. "
                "A Worker needs data.webhookUrl, a Splitter data.arrayPath."
            )
        ),
    ],
) -> CreatedFlow:
    """Save a new flow for stitch_start_run; the server checks the graph."""
    flow = stitch.call("POST", "/flows", {"name": name, "graph": graph})
    return {"id": flow["id"], "name": flow["name"], "version": flow["version"], "nodes": len(flow["graph"]["nodes"])}


@pack.tool(open_world=True)
def stitch_start_run(stitch: StitchClient, flow_id: str, input: Any = None) -> RunStarted:
    """Start a run of a flow with `input`."""
    return _summary(stitch.call("POST", client.path("flows", client.flow_id(flow_id), "runs"), {"input": input}))


@pack.tool(read_only=True, open_world=True)
def stitch_list_runs(
    stitch: StitchClient,
    flow_id: Annotated[str | None, Field(description="Only this flow's runs.")] = None,
    status: RunState | None = None,
    cursor: Annotated[str | None, Field(description="The previous page's next_cursor.")] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Runs per page, 1 to 100.")] = 20,
) -> RunList:
    """Runs, newest first (status waiting_for_user: waiting for a person)."""
    params = {
        "flow_id": client.flow_id(flow_id) if flow_id is not None else None,
        "status": status,
        "cursor": client.cursor(cursor),
        "limit": limit,
    }
    body = stitch.call("GET", "/runs", params=params)
    if not isinstance(body, dict) or "runs" not in body:  # an older server ignores the filters: do not pretend
        raise AgentloomError(
            f"the Stitch server at {stitch.settings.url} is older than this tool (its run list has "
            "no filters or pages); upgrade it to list runs by status or page through them"
        )
    runs: list[RunSummary] = [
        {"run_id": r["id"], "flow_id": r["flow_id"], "status": r["status"], "created_at": _moment(r["created_at"])}
        for r in body["runs"]
    ]
    return {"runs": runs, "next_cursor": body.get("next_cursor")}


@pack.tool(read_only=True, open_world=True)
def stitch_run_status(stitch: StitchClient, run_id: str, include_outputs: bool = False) -> RunStatus:
    """A run's status and each node's (error, a gate's prompt, path counts; outputs if include_outputs)."""
    return _summary(stitch.call("GET", client.path("runs", client.run_id(run_id))), include_outputs)


@pack.tool(read_only=True, open_world=True)
def stitch_list_waiting(
    stitch: StitchClient,
    flow_id: Annotated[str | None, Field(description="Only this flow's gates.")] = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 20,
) -> WaitingList:
    """Gates waiting for a person, oldest first: the prompt, and the input_schema stitch_complete's output must fit."""
    params = {"flow_id": client.flow_id(flow_id) if flow_id is not None else None, "limit": limit}
    gates = stitch.call("GET", "/runs/waiting", params=params)
    return {
        "gates": [
            {
                "run_id": g["run_id"],
                "node_id": g["node_id"],
                "prompt": g.get("prompt"),
                "input_schema": compact_schema(g.get("input_schema")),
            }
            for g in gates
        ]
    }


@pack.tool(open_world=True)
def stitch_complete(stitch: StitchClient, run_id: str, node_id: str, output: Any = None) -> Done:
    """Complete a waiting UX gate with the person's answer as `output`, filling the gate's input_schema
    (a field that does not fit is refused, named; the gate keeps waiting)."""
    body = stitch.call("POST", client.path("complete", client.run_id(run_id), client.node_id(node_id)), output)
    return {"run_id": run_id, "node_id": node_id, "detail": str(body.get("detail", "completed"))}


@pack.tool(open_world=True)
def stitch_retry(stitch: StitchClient, run_id: str, node_id: str) -> Retried:
    """Retry a failed node (a fan-out node: its failed paths), once its upstream is complete."""
    body = stitch.call("POST", client.path("retry", client.run_id(run_id), client.node_id(node_id)))
    return {"run_id": run_id, "node_id": node_id, "detail": str(body.get("detail", "retrying"))}


@pack.tool(destructive=True, idempotent=True, open_world=True)
def stitch_cancel_run(stitch: StitchClient, run_id: str) -> Cancelled:
    """Cancel a run: nothing more goes to workers."""
    body = stitch.call("POST", client.path("runs", client.run_id(run_id), "cancel"))
    reply: Cancelled = {"run_id": run_id, "detail": str(body.get("detail", "cancelled"))}
    if body.get("duplicate"):
        reply["duplicate"] = True
    return reply


def _moment(value: Any) -> str:
    """A time from the server in the one format (an older server sends other ISO 8601 forms)."""
    try:
        return iso(parse(str(value)))
    except ValueError:
        return str(value)


# What a schema says about filling it; the rest (titles, the console's x-stitch-* hints, ...) is
# presentation, left out to keep replies small.
SCHEMA_KEYS = frozenset(
    {
        "type",
        "properties",
        "required",
        "enum",
        "const",
        "items",
        "default",
        "description",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "additionalProperties",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "$defs",
    }
)
SCHEMA_TEXT = 200  # characters of a description kept


def compact_schema(schema: Any) -> Any:
    """An input schema with only what filling it needs (descriptions bounded)."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in SCHEMA_KEYS:
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):  # names of the user's, not keywords
            kept[key] = {name: compact_schema(sub) for name, sub in value.items()}
        elif key == "description" and isinstance(value, str):
            kept[key] = value if len(value) <= SCHEMA_TEXT else value[: SCHEMA_TEXT - 3] + "..."
        elif key in ("enum", "const", "default", "required"):
            kept[key] = value
        else:
            kept[key] = compact_schema(value)
    return kept


def _gate_schemas(graph: Any) -> dict[str, Any]:
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    return {
        str(n.get("id")): n["data"]["inputSchema"]
        for n in nodes or []
        if isinstance(n, dict)
        and n.get("type") == "UX"
        and isinstance(n.get("data"), dict)
        and isinstance(n["data"].get("inputSchema"), dict)
    }


def _summary(run: dict[str, Any], include_outputs: bool = False) -> RunStatus:
    nodes: dict[str, NodeSummary] = {}
    schemas = _gate_schemas(run.get("graph"))
    for key, state in run["node_states"].items():
        if isinstance(state.get("paths"), dict):  # a fan-out template entry: the summary of its paths
            nodes[key] = {"status": state["status"], "paths": state["paths"]}
            continue
        if state.get("path") is None:
            continue  # a template entry from a server that sends no summary: its paths speak for it
        entry: NodeSummary = {"status": state["status"]}
        if state.get("error"):
            entry["error"] = state["error"]
        if state["status"] == "waiting_for_user" and state.get("prompt"):
            entry["prompt"] = str(state["prompt"])
        schema = schemas.get(str(state.get("node_id", key)))
        if state["status"] == "waiting_for_user" and schema is not None:
            entry["input_schema"] = compact_schema(schema)
        if include_outputs and state.get("output") is not None:
            entry["output"] = state["output"]
        nodes[key] = entry
    return {"run_id": run["id"], "flow_id": run["flow_id"], "status": run["status"], "nodes": nodes}
