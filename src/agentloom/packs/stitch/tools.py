"""MCP tools for Stitch: list flows, start a run, read its status, complete a UX gate, retry a node.

They call the Stitch HTTP API (``agentloom stitch serve``), which owns the database and
receives the workers' callbacks; answers are kept small for the model's context.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from agentloom.core.breakers import DependencyFailure
from agentloom.core.errors import AgentloomError, DependencyUnavailable, NotFoundError
from agentloom.core.health import Check
from agentloom.server.packs import Pack, PackContext

pack = Pack("stitch", "Run React Flow workflows on a Stitch server: start runs, follow them, answer gates, retry", requires=["httpx"])


class StitchPackSettings(BaseModel):
    model_config = ConfigDict(frozen=True)  # hashable: one HTTP client per settings

    url: str = Field("http://127.0.0.1:8000", description="The Stitch server (agentloom stitch serve).")
    api_key: str | None = Field(None, description="Sent as a bearer token when the server needs one.")
    timeout_seconds: float = Field(10.0, gt=0)


class FlowSummary(TypedDict):
    id: str
    name: str
    version: int
    nodes: int
    updated_at: str


class FlowList(TypedDict):
    flows: list[FlowSummary]


class NodeSummary(TypedDict, total=False):
    status: str
    output: Any
    error: str


class RunStatus(TypedDict):
    run_id: str
    flow_id: str
    status: str
    nodes: dict[str, NodeSummary]


class Answer(TypedDict):
    ok: bool
    detail: str


@pack.setup
def setup(ctx: PackContext) -> None:
    ctx.state = ctx.config(StitchPackSettings)


@functools.cache
def _client(settings: StitchPackSettings) -> Any:
    import httpx  # on first use, not at start: importing it costs 80 ms

    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    return httpx.Client(base_url=settings.url.rstrip("/") + "/api/stitch", headers=headers, timeout=settings.timeout_seconds)


@pack.health
def health(ctx: PackContext) -> list[Check]:
    settings = ctx.state
    try:
        body = _call("GET", "/health")
        return [Check("stitch server", True, f"{settings.url}: {body['database']}", required=False)]
    except AgentloomError as exc:  # optional: the other packs work without a Stitch server
        if "url" not in settings.model_fields_set:  # nobody asked for one: not running is not a fault
            return [Check("stitch server", True, f"none at the default {settings.url} (start one with `agentloom stitch serve`)")]
        return [Check("stitch server", False, str(exc), required=False)]


def _request(method: str, path: str, json: Any = None, *, accept: tuple[int, ...] = ()) -> Any:
    assert pack.context is not None
    settings = pack.context.state
    client = _client(settings)
    breaker = pack.context.breakers.get("stitch")
    import httpx

    with breaker.guard():
        try:
            response = client.request(method, path, json=json)
        except httpx.HTTPError as exc:
            raise DependencyFailure(f"Stitch server at {settings.url} is unreachable ({type(exc).__name__}); "
                                    "start it with `agentloom stitch serve` or set AGENTLOOM_STITCH__URL") from None
        if response.status_code >= 500:
            raise DependencyFailure(f"Stitch server at {settings.url} answered HTTP {response.status_code}")
    if response.status_code == 404:
        raise NotFoundError(str(response.json().get("detail", "not found")))
    if response.status_code == 401:
        raise AgentloomError("the Stitch server wants an API key: set AGENTLOOM_STITCH__API_KEY")
    if response.status_code >= 400 and response.status_code not in accept:
        raise AgentloomError(f"Stitch refused: {response.json().get('detail', response.text)}")
    return response.json()


def _call(method: str, path: str, json: Any = None, *, accept: tuple[int, ...] = ()) -> Any:
    try:
        return _request(method, path, json, accept=accept)
    except DependencyFailure as exc:
        raise DependencyUnavailable(str(exc)) from None


@pack.tool(read_only=True, open_world=True)
def stitch_list_flows() -> FlowList:
    """List the flows on the Stitch server (id, name, version, node count)."""
    flows = _call("GET", "/flows")
    return {"flows": [{"id": f["id"], "name": f["name"], "version": f["version"], "nodes": len(f["graph"]["nodes"]),
                       "updated_at": str(f["updated_at"])} for f in flows]}


@pack.tool(open_world=True)
def stitch_start_run(flow_id: str, input: Any = None) -> RunStatus:  # noqa: A002 - the API's word
    """Start a run of a flow with this input; returns the run id and the first node states."""
    return _summary(_call("POST", f"/flows/{flow_id}/runs", {"input": input}))


@pack.tool(read_only=True, open_world=True)
def stitch_run_status(run_id: str, include_outputs: bool = False) -> RunStatus:
    """The run's status and each node's status (errors always; outputs when asked)."""
    return _summary(_call("GET", f"/runs/{run_id}"), include_outputs)


@pack.tool(open_world=True)
def stitch_complete(run_id: str, node_id: str, output: Any = None) -> Answer:
    """Complete a UX node that is waiting_for_user, with the person's input as its output."""
    body = _call("POST", f"/complete/{run_id}/{node_id}", output, accept=(400, 409))
    return {"ok": bool(body.get("ok")), "detail": str(body.get("detail"))}


@pack.tool(open_world=True)
def stitch_retry(run_id: str, node_id: str) -> Answer:
    """Retry a failed node; it fires again once its upstream nodes are complete."""
    body = _call("POST", f"/retry/{run_id}/{node_id}", accept=(400,))
    return {"ok": bool(body.get("ok")), "detail": str(body.get("detail"))}


def _summary(run: dict[str, Any], include_outputs: bool = False) -> RunStatus:
    nodes: dict[str, NodeSummary] = {}
    for key, state in run["node_states"].items():
        if state.get("path") is None:
            continue  # the template entry of a node that runs on fan-out paths
        entry: NodeSummary = {"status": state["status"]}
        if state.get("error"):
            entry["error"] = state["error"]
        if include_outputs and state.get("output") is not None:
            entry["output"] = state["output"]
        nodes[key] = entry
    return {"run_id": run["id"], "flow_id": run["flow_id"], "status": run["status"], "nodes": nodes}
