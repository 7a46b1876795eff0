"""MCP tools for Stitch: list flows, start a run, read its status, complete a UX gate, retry a node.

They call the Stitch HTTP API (``agentloom stitch serve``), which owns the database and
receives the workers' callbacks; answers are kept small for the model's context.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from agentloom.core.breakers import BreakerRegistry, DependencyFailure
from agentloom.core.dependency import Dependency
from agentloom.core.errors import AgentloomError, NotFoundError
from agentloom.core.health import Check
from agentloom.server.packs import Pack, PackContext

if TYPE_CHECKING:
    import httpx

pack = Pack("stitch", "Run React Flow workflows on a Stitch server: start runs, follow them, answer gates, retry", requires=["httpx"],
            cli="agentloom.packs.stitch.cli:app")


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


class Done(TypedDict):
    run_id: str
    node_id: str
    detail: str


class StitchClient:
    """The pack's state: one HTTP client to the Stitch server, behind the ``stitch`` breaker."""

    def __init__(self, settings: StitchPackSettings, breakers: BreakerRegistry) -> None:
        self.settings = settings
        self.dependency = Dependency("stitch", breakers.get("stitch"), is_failure=_is_outage, describe=self._unreachable)
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    def _client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                import httpx  # on first use, not at start: importing it costs 80 ms

                s = self.settings
                headers = {"Authorization": f"Bearer {s.api_key}"} if s.api_key else {}
                self._http = httpx.Client(base_url=s.url.rstrip("/") + "/api/stitch", headers=headers, timeout=s.timeout_seconds)
            return self._http

    def call(self, method: str, path: str, json: Any = None) -> Any:
        client = self._client()
        response = self.dependency.call(lambda: _checked(client.request(method, path, json=json), self.settings.url))
        if response.status_code == 401:
            raise AgentloomError("the Stitch server wants an API key: set AGENTLOOM_STITCH__API_KEY")
        if response.status_code >= 400:
            detail = _detail(response)
            raise (NotFoundError if response.status_code == 404 else AgentloomError)(f"Stitch refused: {detail}")
        return response.json()

    def _unreachable(self, exc: BaseException) -> str:
        if isinstance(exc, DependencyFailure):
            return str(exc)
        return (f"Stitch server at {self.settings.url} is unreachable ({type(exc).__name__}); "
                "start it with `agentloom stitch serve` or set AGENTLOOM_STITCH__URL")


def _checked(response: httpx.Response, url: str) -> httpx.Response:
    if response.status_code >= 500:
        raise DependencyFailure(f"Stitch server at {url} answered HTTP {response.status_code}: {_detail(response)}")
    return response


def _is_outage(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, httpx.TransportError)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    return str(body.get("detail", body) if isinstance(body, dict) else body)[:300]


@pack.setup
def setup(ctx: PackContext) -> StitchClient:
    return StitchClient(ctx.config(StitchPackSettings), ctx.breakers)


@pack.health
def health(stitch: StitchClient) -> list[Check]:
    settings = stitch.settings
    try:
        body = stitch.call("GET", "/health")
        return [Check("stitch server", True, f"{settings.url}: {body['database']}", required=False)]
    except AgentloomError as exc:  # optional: the other packs work without a Stitch server
        if "url" not in settings.model_fields_set:  # nobody asked for one: not running is not a fault
            return [Check("stitch server", True, f"none at the default {settings.url} (start one with `agentloom stitch serve`)")]
        return [Check("stitch server", False, str(exc), required=False)]


@pack.tool(read_only=True, open_world=True)
def stitch_list_flows(stitch: StitchClient) -> FlowList:
    """List the flows on the Stitch server (id, name, version, node count)."""
    flows = stitch.call("GET", "/flows")
    return {"flows": [{"id": f["id"], "name": f["name"], "version": f["version"], "nodes": len(f["graph"]["nodes"]),
                       "updated_at": str(f["updated_at"])} for f in flows]}


@pack.tool(open_world=True)
def stitch_start_run(stitch: StitchClient, flow_id: str, input: Any = None) -> RunStatus:  # noqa: A002 - the API's word
    """Start a run of a flow with this input; returns the run id and the first node states."""
    return _summary(stitch.call("POST", f"/flows/{flow_id}/runs", {"input": input}))


@pack.tool(read_only=True, open_world=True)
def stitch_run_status(stitch: StitchClient, run_id: str, include_outputs: bool = False) -> RunStatus:
    """The run's status and each node's status (errors always; outputs when asked)."""
    return _summary(stitch.call("GET", f"/runs/{run_id}"), include_outputs)


@pack.tool(open_world=True)
def stitch_complete(stitch: StitchClient, run_id: str, node_id: str, output: Any = None) -> Done:
    """Complete a UX node that is waiting_for_user, with the person's input as its output.
    A node that is not waiting is refused with the reason."""
    body = stitch.call("POST", f"/complete/{run_id}/{node_id}", output)
    return {"run_id": run_id, "node_id": node_id, "detail": str(body.get("detail", "completed"))}


@pack.tool(open_world=True)
def stitch_retry(stitch: StitchClient, run_id: str, node_id: str) -> Done:
    """Retry a failed node; it fires again once its upstream nodes are complete. A node that
    has not failed is refused with the reason."""
    body = stitch.call("POST", f"/retry/{run_id}/{node_id}")
    return {"run_id": run_id, "node_id": node_id, "detail": str(body.get("detail", "retrying"))}


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
