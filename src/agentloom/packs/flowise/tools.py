"""The MCP tools of the flowise pack: each reply a few dozen tokens, flowData never in the context."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NotRequired, ParamSpec, TypeVar

from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError, NotFoundError
from agentloom.core.health import Check
from agentloom.core.work import current_step
from agentloom.packs.flowise.replies import Refreshed
from agentloom.server.packs import Pack, PackContext
from agentloom.server.work import run_work

if TYPE_CHECKING:
    from pathlib import Path

    from agentloom.core.breakers import BreakerRegistry
    from agentloom.embeddings import EmbeddingService
    from agentloom.packs.flowise.builder import Builder
    from agentloom.packs.flowise.catalog import Catalog
    from agentloom.packs.flowise.learning import LearningStore
    from agentloom.packs.flowise.settings import FlowiseSettings
    from agentloom.retrieval.connection import ChromaConnection

log = logging.getLogger("agentloom.packs.flowise")
P = ParamSpec("P")
T = TypeVar("T")

pack: Pack[Flowise] = Pack(
    "flowise",
    "Build Flowise chatflows from a node catalog and templates, at a few tokens per call",
    requires=["chromadb", "tiktoken"],
    install="'agentloom[flowise]'",
    cli="agentloom.packs.flowise.cli:app",
)


class NodeHit(TypedDict):
    name: str
    label: str
    category: str
    score: float
    deprecated: NotRequired[bool]


class NodeSearch(TypedDict):
    results: list[NodeHit]
    message: NotRequired[str]


class TemplateHit(TypedDict):
    template_id: str
    name: str
    nodes: list[str]


class TemplateSearch(TypedDict):
    results: list[TemplateHit]
    message: NotRequired[str]


class Built(TypedDict):
    chatflow_id: str
    name: str
    attached: NotRequired[list[str]]
    credentials: NotRequired[list[str]]
    fill: NotRequired[list[str]]
    issues: NotRequired[list[str]]
    warning: NotRequired[str]


class ChatflowLine(TypedDict):
    id: str
    name: str
    updated: str | None


class ChatflowList(TypedDict):
    chatflows: list[ChatflowLine]
    count: int


class Deleted(TypedDict):
    deleted: str


class Flowise:
    """The pack's state: the API client now; Chroma, the catalog and the learning store on first use."""

    def __init__(
        self, settings: FlowiseSettings, folder: Path, breakers: BreakerRegistry, embeddings: EmbeddingService
    ) -> None:
        from agentloom.packs.flowise.client import FlowiseClient

        self.settings = settings
        self.folder = folder
        self.client = FlowiseClient(settings, breakers)
        self._breakers = breakers
        self._embeddings = embeddings
        self._chroma: ChromaConnection | None = None
        self._catalog: Catalog | None = None
        self._learning: LearningStore | None = None
        self._lock = threading.Lock()

    @property
    def chroma(self) -> ChromaConnection:
        """The pack's embedded ChromaDB, through the connection the vectors pack uses too (no second wrapper)."""
        with self._lock:
            if self._chroma is None:
                from agentloom.retrieval.connection import ChromaConnection, EmbeddedChroma

                path = self.settings.chroma_path or self.folder / "chroma"
                self._chroma = ChromaConnection(EmbeddedChroma(path), self._breakers)
            return self._chroma

    @property
    def catalog(self) -> Catalog:
        chroma = self.chroma
        with self._lock:
            if self._catalog is None:
                from agentloom.packs.flowise.catalog import Catalog

                self._catalog = Catalog(self.folder, self.settings, self.client, chroma, self._embeddings)
            return self._catalog

    @property
    def learning(self) -> LearningStore:
        chroma = self.chroma
        with self._lock:
            if self._learning is None:
                from agentloom.packs.flowise.learning import LearningStore

                self._learning = LearningStore(chroma, self._embeddings, self.settings.embedding_model)
            return self._learning

    @property
    def builder(self) -> Builder:
        from agentloom.packs.flowise.builder import Builder

        return Builder(self.catalog, self.client)


@pack.setup
def setup(ctx: PackContext) -> Flowise:
    """The pack's settings, its folder, the shared breakers and embedding service."""
    from agentloom.packs.flowise.settings import FlowiseSettings

    state = Flowise(ctx.config(FlowiseSettings), ctx.data_dir, ctx.breakers, ctx.embeddings)
    ctx.log.info("flowise: server %s%s", state.settings.url, "" if state.settings.api_key else " (no API key set)")
    return state


@pack.health
def health(state: Flowise) -> list[Check]:
    """Flowise down is not an error of this server: searches answer from the cached catalog."""
    problem = state.client.ping()
    age = state.catalog.age_seconds()
    catalog = "no catalog yet" if age is None else f"catalog {age / 3600:.1f} h old"
    where = f"Flowise ({state.settings.url})"
    if problem:
        return [Check(where, False, f"{problem}; {catalog}", required=False)]
    key = "" if state.settings.api_key else "; no API key set (AGENTLOOM_FLOWISE__API_KEY)"
    return [Check(where, not key, f"answers; {catalog}{key}", required=False)]


async def run_call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    return await run_work(f"flowise {getattr(fn, '__name__', 'call')}", lambda: fn(*args, **kwargs))


def _check_search(query: str, limit: int) -> None:
    if not query.strip():
        raise AgentloomError("query: it is empty; describe the need, e.g. 'remember the conversation'.")
    if not 1 <= limit <= 10:
        raise AgentloomError(f"limit {limit} is outside 1-10.")


def _ready(state: Flowise) -> str | None:
    """A catalog to search: the first search fetches it; later ones never wait for the server."""
    if state.catalog.state().refreshed_at is None:
        return state.catalog.refresh().get("message")
    return None


@pack.tool(read_only=True)
async def flowise_search_nodes(state: Flowise, query: str, category: str | None = None, limit: int = 5) -> NodeSearch:
    """Flowise nodes for a need ("split PDFs"), best first; `category` narrows (Memory, Tools, ...)."""
    _check_search(query, limit)

    def search() -> NodeSearch:
        message = _ready(state)
        results = state.catalog.search_nodes(query, category, limit)
        reply: NodeSearch = {"results": results}  # type: ignore[typeddict-item]  # search_nodes answers plain dicts with NodeHit's keys
        if not results:
            reply["message"] = "no node matches well; rephrase or drop category."
        elif message:
            reply["message"] = message
        return reply

    return await run_call(search)


@pack.tool(read_only=True)
async def flowise_search_templates(state: Flowise, query: str, limit: int = 5) -> TemplateSearch:
    """Marketplace chatflow templates for a need, best first."""
    _check_search(query, limit)

    def search() -> TemplateSearch:
        message = _ready(state)
        hits = state.catalog.search_templates(query, limit)
        results: list[TemplateHit] = [
            {"template_id": t.template_id, "name": t.name, "nodes": _short_nodes(t.nodes)} for t, _ in hits
        ]
        reply: TemplateSearch = {"results": results}
        if not results:
            reply["message"] = "no template matches; build from nodes instead."
        elif message:
            reply["message"] = message
        return reply

    return await run_call(search)


def _short_nodes(nodes: list[str], keep: int = 4) -> list[str]:
    unique = list(dict.fromkeys(nodes))
    return unique if len(unique) <= keep else [*unique[:keep], f"+{len(unique) - keep} more"]


@pack.tool()
async def flowise_build_flow(
    state: Flowise,
    template_id: str | None = None,
    nodes: list[str] | None = None,
    name: str | None = None,
    model: str | None = None,
    temperature: float | None = None,
    memory_type: str | None = None,
    settings: dict[str, dict[str, Any]] | None = None,
    credentials: list[str] | None = None,
    request: str | None = None,
) -> Built:
    """Create a chatflow from a template_id or node names. model: a chat node or model
    name; settings: {node: {input: value}} (files as paths); credentials: names (a kind's only one is
    used unasked)."""

    def build() -> Built:
        started = time.perf_counter()
        what = request or (f"template {template_id}" if template_id else "nodes " + ", ".join(nodes or []))
        try:
            reply = state.builder.build(
                template_id=template_id,
                nodes=nodes,
                name=name,
                model=model,
                temperature=temperature,
                memory_type=memory_type,
                settings=settings,
                credentials=credentials,
            )
        except AgentloomError as exc:
            log_session(state, what, "failed", str(exc), started, None)
            raise
        log_session(state, what, "created", reply, started, reply["chatflow_id"])
        return reply  # type: ignore[return-value]  # Builder answers a plain dict with the reply's keys

    return await run_call(build)


def log_session(
    state: Flowise,
    request: str,
    outcome: str,
    reply: Any,
    started: float,
    chatflow_id: str | None,
    artifact_id: str | None = None,
) -> None:
    """One sessions record per build attempt (build_flow, reuse_design): the reply's tokens and the time
    since ``started``; recording never makes the attempt fail."""
    from agentloom.packs.flowise.tokens import tokens

    try:
        state.learning.record_session(
            request, outcome, tokens(reply), time.perf_counter() - started, chatflow_id, artifact_id
        )
    except Exception:
        log.warning("flowise: could not record the build session", exc_info=True)


@pack.tool(idempotent=True)
async def flowise_refresh_catalog(state: Flowise, force: bool = False) -> Refreshed:
    """Fetch and index Flowise's nodes and templates if older than 24 h (or `force`)."""

    return await run_call(state.catalog.refresh, force, current_step)


@pack.tool(read_only=True)
async def flowise_list_chatflows(state: Flowise) -> ChatflowList:
    """The chatflows on the Flowise server."""

    def listing() -> ChatflowList:
        flows = state.client.list_chatflows()
        lines: list[ChatflowLine] = [
            {"id": str(f.get("id")), "name": str(f.get("name")), "updated": f.get("updatedDate")} for f in flows
        ]
        return {"chatflows": lines, "count": len(lines)}

    return await run_call(listing)


@pack.tool(destructive=True, idempotent=True)
async def flowise_delete_chatflow(state: Flowise, id: str) -> Deleted:
    """Delete a chatflow from Flowise by its id."""

    def delete() -> Deleted:
        import uuid

        try:
            uuid.UUID(id)
        except ValueError:
            raise AgentloomError(
                f"id {id!r} is not a chatflow id (a UUID); flowise_list_chatflows shows them."
            ) from None
        try:
            state.client.get_chatflow(id)  # Flowise answers a missing one's DELETE with a 500
        except NotFoundError:
            raise NotFoundError(f"chatflow {id} not found; flowise_list_chatflows shows the existing ones.") from None
        state.client.delete_chatflow(id)
        return {"deleted": id}

    return await run_call(delete)
