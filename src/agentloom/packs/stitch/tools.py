"""MCP tools for Stitch: list flows, start a run, read its status, complete a UX gate, retry a node.

They call the Stitch HTTP API (``agentloom stitch serve``), which owns the database and
receives the workers' callbacks; answers are kept small for the model's context.

Run and flow ids are checked before any request (they are UUIDs), node ids for what no URL
can carry (empty, dots alone, control characters), and every path segment is
percent-encoded, so an argument can never reach another endpoint (``run_id="../retry/..."``)
or add a query (``node_id="a?x=1"``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from agentloom.core.breakers import BreakerRegistry, DependencyFailure
from agentloom.core.dependency import Dependency
from agentloom.core.errors import AgentloomError, NotFoundError
from agentloom.core.health import Check
from agentloom.core.timestamps import iso, parse
from agentloom.server.packs import Pack, PackContext
from agentloom.stitch.ids import NODE_ID_CHARACTERS, is_uuid, shown

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
    updated_at: str  # e.g. 2026-11-23T11:32:00.123Z


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


# What counts on the ``stitch`` breaker (it opens after a few in a row and then refuses every
# stitch tool for a while): only signs that the server cannot be used at all, that is a
# connection failure or timeout (``_is_outage``) and 502, 503 or 504 (a proxy without a
# server behind it, or Stitch saying its database is unavailable). Any other 5xx is one
# request failing, for instance on one run's data: the call reports it as its own error and
# the breaker records no verdict, so one bad run cannot shut every tool out.
OUTAGE_STATUSES = frozenset({502, 503, 504})


def _checked(response: httpx.Response, url: str) -> httpx.Response:
    if response.status_code in OUTAGE_STATUSES:
        raise DependencyFailure(f"Stitch server at {url} answered HTTP {response.status_code}: {_detail(response)}")
    if response.status_code >= 500:  # an AgentloomError: Dependency records no verdict and passes it on
        raise AgentloomError(f"the Stitch server at {url} failed on this request (HTTP {response.status_code}: "
                             f"{_detail(response)}); other requests are not affected, its log has the details")
    return response


def _run_id(value: str) -> str:
    if not is_uuid(value):
        raise AgentloomError(f"run_id: {shown(value)} is not a run id; run ids are UUIDs, as stitch_start_run returns them")
    return value.lower()


def _flow_id(value: str) -> str:
    if not is_uuid(value):
        raise AgentloomError(f"flow_id: {shown(value)} is not a flow id; flow ids are UUIDs, as stitch_list_flows lists them")
    return value.lower()


def _node_id(value: str) -> str:
    # Percent-encoding makes any other text one harmless path segment (an unknown node is the
    # server's 404). Flows saved before node ids were restricted may still have ids outside
    # today's alphabet, so only what encoding cannot carry is refused here.
    if not value or not value.strip(".") or not value.isprintable() or len(value) > 1000:
        raise AgentloomError(f"node_id: {shown(value)} is not a node id (node ids use {NODE_ID_CHARACTERS}); "
                             "stitch_run_status lists the run's nodes")
    return value


def _path(*segments: str) -> str:
    """A path under /api/stitch with every segment percent-encoded ('/', '?', '#', '%' included)."""
    return "".join("/" + quote(segment, safe="") for segment in segments)


def _is_outage(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, httpx.TransportError)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list) and all(isinstance(d, dict) and "msg" in d for d in detail):
        detail = "; ".join(str(d["msg"]) for d in detail)  # a 422: its messages name the place
    return str(detail)[:300]


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
                       "updated_at": _moment(f["updated_at"])} for f in flows]}


@pack.tool(open_world=True)
def stitch_start_run(stitch: StitchClient, flow_id: str, input: Any = None) -> RunStatus:  # noqa: A002 - the API's word
    """Start a run of a flow with this input; returns the run id and the first node states."""
    return _summary(stitch.call("POST", _path("flows", _flow_id(flow_id), "runs"), {"input": input}))


@pack.tool(read_only=True, open_world=True)
def stitch_run_status(stitch: StitchClient, run_id: str, include_outputs: bool = False) -> RunStatus:
    """The run's status and each node's status (errors always; outputs when asked)."""
    return _summary(stitch.call("GET", _path("runs", _run_id(run_id))), include_outputs)


@pack.tool(open_world=True)
def stitch_complete(stitch: StitchClient, run_id: str, node_id: str, output: Any = None) -> Done:
    """Complete a UX node that is waiting_for_user, with the person's input as its output.
    A node that is not waiting is refused with the reason."""
    body = stitch.call("POST", _path("complete", _run_id(run_id), _node_id(node_id)), output)
    return {"run_id": run_id, "node_id": node_id, "detail": str(body.get("detail", "completed"))}


@pack.tool(open_world=True)
def stitch_retry(stitch: StitchClient, run_id: str, node_id: str) -> Done:
    """Retry a failed node; it fires again once its upstream nodes are complete. A node that
    has not failed is refused with the reason."""
    body = stitch.call("POST", _path("retry", _run_id(run_id), _node_id(node_id)))
    return {"run_id": run_id, "node_id": node_id, "detail": str(body.get("detail", "retrying"))}


def _moment(value: Any) -> str:
    """A time from the server in the one format (an older server sends other ISO 8601 forms)."""
    try:
        return iso(parse(str(value)))
    except ValueError:
        return str(value)


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
