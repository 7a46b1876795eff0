"""The stitch pack's HTTP client to a Stitch server, and the checks on what the tools send it.

Run and flow ids are checked before any request (they are UUIDs), node ids for what no URL
can carry (empty, dots alone, control characters), and every path segment is
percent-encoded, so an argument can never reach another endpoint (``run_id="../retry/..."``)
or add a query (``node_id="a?x=1"``).

Every answer that is not a success becomes an :class:`AgentloomError`, so the MCP client
sees ``isError: true`` with the server's reason, never a result that says ``ok: false``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from agentloom.core.breakers import BreakerRegistry, DependencyFailure
from agentloom.core.dependency import Dependency
from agentloom.core.errors import AgentloomError, NotFoundError
from agentloom.stitch.ids import NODE_ID_CHARACTERS, is_uuid, shown

if TYPE_CHECKING:
    import httpx


class StitchPackSettings(BaseModel):
    model_config = ConfigDict(frozen=True)  # hashable: one HTTP client per settings

    url: str = Field("http://127.0.0.1:8000", description="The Stitch server (agentloom stitch serve).")
    api_key: str | None = Field(None, description="Sent as a bearer token when the server needs one.")
    timeout_seconds: float = Field(10.0, gt=0)


class StitchClient:
    """The pack's state: one HTTP client to the Stitch server, behind the ``stitch`` breaker."""

    def __init__(self, settings: StitchPackSettings, breakers: BreakerRegistry) -> None:
        self.settings = settings
        self.dependency = Dependency(
            "stitch", breakers.get("stitch"), is_failure=_is_outage, describe=self._unreachable
        )
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    def _client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                import httpx  # on first use, not at start: importing it costs 80 ms

                s = self.settings
                headers = {"Authorization": f"Bearer {s.api_key}"} if s.api_key else {}
                self._http = httpx.Client(
                    base_url=s.url.rstrip("/") + "/api/stitch", headers=headers, timeout=s.timeout_seconds
                )
            return self._http

    def call(self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        client = self._client()
        query = {k: v for k, v in (params or {}).items() if v is not None} or None
        response = self.dependency.call(
            lambda: _checked(client.request(method, path, json=json, params=query), self.settings.url)
        )
        if response.status_code == 401:
            raise AgentloomError(self._key_refused())
        if response.status_code >= 400:
            detail = _detail(response)
            raise (NotFoundError if response.status_code == 404 else AgentloomError)(f"Stitch refused: {detail}")
        body = response.json()
        # An event endpoint answers {ok, detail, duplicate}; a refusal is never a result.
        if isinstance(body, dict) and body.get("ok") is False:
            raise AgentloomError(f"Stitch refused: {str(body.get('detail', 'no reason given'))[:300]}")
        return body

    def _key_refused(self) -> str:
        url = self.settings.url
        if self.settings.api_key:
            return (
                f"the Stitch server at {url} refused the API key in AGENTLOOM_STITCH__API_KEY: it is not the "
                "server's STITCH_API_KEY; set AGENTLOOM_STITCH__API_KEY to the key the server was started with"
            )
        return f"the Stitch server at {url} wants an API key: set AGENTLOOM_STITCH__API_KEY to its STITCH_API_KEY"

    def _unreachable(self, exc: BaseException) -> str:
        if isinstance(exc, DependencyFailure):
            return str(exc)
        return (
            f"Stitch server at {self.settings.url} is unreachable ({type(exc).__name__}); "
            "start it with `agentloom stitch serve` or set AGENTLOOM_STITCH__URL"
        )


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
        raise AgentloomError(
            f"the Stitch server at {url} failed on this request (HTTP {response.status_code}: "
            f"{_detail(response)}); other requests are not affected, its log has the details"
        )
    return response


def run_id(value: str) -> str:
    if not is_uuid(value):
        raise AgentloomError(
            f"run_id: {shown(value)} is not a run id; run ids are UUIDs, as stitch_start_run returns them"
        )
    return value.lower()


def flow_id(value: str) -> str:
    if not is_uuid(value):
        raise AgentloomError(
            f"flow_id: {shown(value)} is not a flow id; flow ids are UUIDs, as stitch_list_flows lists them"
        )
    return value.lower()


def node_id(value: str) -> str:
    # Percent-encoding makes any other text one harmless path segment (an unknown node is the
    # server's 404). Flows saved before node ids were restricted may still have ids outside
    # today's alphabet, so only what encoding cannot carry is refused here. A '/' is one of
    # those: the server decodes %2F before routing, so it would split the segment in two.
    if "/" in value:
        raise AgentloomError(
            f"node_id: {shown(value)} contains '/', which no node id can contain (node ids use "
            f"{NODE_ID_CHARACTERS}; fan-out paths are named like w_0_1); stitch_run_status lists the run's nodes"
        )
    if not value or not value.strip(".") or not value.isprintable() or len(value) > 1000:
        raise AgentloomError(
            f"node_id: {shown(value)} is not a node id (node ids use {NODE_ID_CHARACTERS}); "
            "stitch_run_status lists the run's nodes"
        )
    return value


def cursor(value: str | None) -> str | None:
    # Opaque to the tools; it travels as a query value (encoded by httpx), so only text no
    # server ever hands out is refused here.
    if value is not None and (not value or not value.isprintable() or len(value) > 1000):
        raise AgentloomError(
            f"cursor: {shown(value)} is not a cursor; pass the next_cursor of the previous "
            "stitch_list_runs reply unchanged, or leave it out for the first page"
        )
    return value


def path(*segments: str) -> str:
    """A path under /api/stitch with every segment percent-encoded ('/', '?', '#', '%' included)."""
    return "".join("/" + quote(segment, safe="") for segment in segments)


def _is_outage(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, httpx.TransportError)


PROBLEMS_SHOWN = 20  # a 422 for a large graph may name many; the first ones are enough to fix


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list) and all(isinstance(d, dict) and "msg" in d for d in detail):
        return _problems(detail)  # a 422: one line per problem, each with its place
    return str(detail)[:300]


def _problems(items: list[dict[str, Any]]) -> str:
    lines = []
    for item in items[:PROBLEMS_SHOWN]:
        # 'body' and 'query' say where FastAPI found the value; the rest names the argument.
        loc = [str(part) for part in item.get("loc", []) if part not in ("body", "query", "path")]
        place = ".".join(loc)
        message = str(item["msg"])[:300]
        # A message that starts with its field already names it (an input schema's "amount: ...").
        named = not place or message.startswith(f"{place}:") or item.get("type") == "input_schema"
        lines.append(message if named else f"{place}: {message}")
    if len(items) > PROBLEMS_SHOWN:
        lines.append(f"... and {len(items) - PROBLEMS_SHOWN} more")
    return "; ".join(lines)
