"""The Stitch HTTP API (FastAPI). Everything lives under /api/stitch; OpenAPI docs at /docs
(Swagger UI served from this server's own files, so the page works with no internet); the web
console at / (:mod:`console`); live updates as server-sent events (:mod:`live`).

What reaches the engine has passed, in this order: the body size limit (413, from the
Content-Length header or while the body streams in, before it is parsed), JSON decoding with
Stitch's value rules (:mod:`values`: 422 naming the JSON path), the request models, and for
flows the graph checks (node ids, webhook targets). Nothing is written before all of them.
With ``STITCH_API_KEY`` set, every endpoint but the callbacks and health needs the key,
``/docs``, ``/openapi.json`` and ``/metrics`` included (the API description is not public on a
server that is not). ``/metrics`` is Prometheus's text format (:mod:`metrics`). A database
that cannot be reached answers 503, so clients can tell an outage from a request that failed. A
query parameter an endpoint does not take is a 422 naming it and the ones it takes, never
silently ignored (a misspelt filter would otherwise list everything).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import Body, FastAPI, HTTPException, Path, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from agentloom.stitch import console, metrics, queries
from agentloom.stitch.bounded_schemas import CALLER_GONE, CallerGone
from agentloom.stitch.callbacks import CallbackFastPath, Callbacks, NotSigned
from agentloom.stitch.db import Database
from agentloom.stitch.dispatcher import Dispatcher
from agentloom.stitch.engine import Engine, FlowChanging, Sending
from agentloom.stitch.execution import Result
from agentloom.stitch.flows import FlowBusy, Flows
from agentloom.stitch.graph import GraphError, Problem
from agentloom.stitch.groupcommit import GroupCommit
from agentloom.stitch.ids import NotFound, shown
from agentloom.stitch.input_schemas import InputRefused
from agentloom.stitch.live import EventFeed, Message, Subscription, last_event_id, stream
from agentloom.stitch.middleware import PREFIX, AllowHeader, BodyLimit, CallbackAdmission, RequireKey
from agentloom.stitch.models import (
    EXTRA_KEYS,
    GRAPH_MARK,
    JSON_VALUE_SCHEMA,
    Callback,
    Graph,
    JsonValue,
    RunStatus,
    text_field,
    with_json_value,
)
from agentloom.stitch.replies import (
    AttemptReply,
    EventReply,
    FlowDeleted,
    FlowDiff,
    FlowListed,
    FlowReply,
    FlowVersion,
    FlowVersionListed,
    GraphCheck,
    Health,
    RunEvent,
    RunPage,
    RunReply,
    WaitingGate,
    as_replies,
    as_reply,
    errors,
)
from agentloom.stitch.retention import Policy, Pruner
from agentloom.stitch.settings import StitchSettings
from agentloom.stitch.values import BadJson, decode

log = logging.getLogger(__name__)
DOCS_ASSETS = "/docs-assets"  # Swagger UI's own files (swagger-ui-bundle-v2), served here: no CDN
SSE_REPLY: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A stream of server-sent events (text/event-stream) that stays open.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
# Said in the schema only: queries.BadQuery refuses anything else with a message naming the fix.
FlowIdQuery = Annotated[
    str | None,
    Query(description="Only this flow's runs (its id, a UUID).", json_schema_extra={"pattern": UUID_PATTERN}),
]


# A graph as sent: described by the Graph schema, but read as JSON and checked by checks.check,
# the one rule set of saving and of POST /flows/validate (its 422 names each problem's node).
GraphJson = Annotated[Any, WithJsonSchema(GRAPH_MARK)]
NoGraphOrJson = Annotated[Any, WithJsonSchema({"anyOf": [GRAPH_MARK, {"type": "null"}]})]
VERSION_MAX = 2**31 - 1  # the column's range on both databases
EVENT_ID_MAX = 2**63 - 1  # a BIGINT, on both databases
CHECKING_THREADS = 16  # threads for run starts and gate completions (see ``checked``)
DESIGNING_THREADS = 4  # threads for saving and checking graphs
AUTHOR = "Who saves this version (a name or an address, as your users know it); null: unknown."
VALIDATE_BODY: dict[str, Any] = {
    "description": 'The graph to check: {"graph": {...}}, or the graph itself {"nodes": [...], "edges": [...]}.',
    "anyOf": [
        {
            "type": "object",
            "title": "GraphToCheck",
            "properties": {"graph": GRAPH_MARK},
            "required": ["graph"],
            "additionalProperties": False,
        },
        GRAPH_MARK,
    ],
}


class FlowIn(BaseModel):
    model_config = ConfigDict(json_schema_extra=EXTRA_KEYS)  # other keys are ignored, but must be Stitch JSON
    name: str = text_field(min_length=1, max_length=200, description="The flow's name.")
    graph: GraphJson = Field(
        description="The React Flow graph: nodes (Worker, UX, Splitter, Collector) and edges. Saved as sent, "
        "key for key."
    )
    author: str | None = text_field(default=None, min_length=1, max_length=200, description=AUTHOR)


class FlowUpdate(BaseModel):
    model_config = ConfigDict(json_schema_extra=EXTRA_KEYS)  # other keys are ignored, but must be Stitch JSON
    name: str | None = text_field(
        default=None, min_length=1, max_length=200, description="A new name; left as it is when absent."
    )
    graph: NoGraphOrJson = Field(None, description="A new graph; running runs keep the one they started with.")
    author: str | None = text_field(default=None, min_length=1, max_length=200, description=AUTHOR)


class RunIn(BaseModel):
    model_config = ConfigDict(json_schema_extra=EXTRA_KEYS)  # other keys are ignored, but must be Stitch JSON
    input: JsonValue = Field(None, description="The run's input: what the root nodes receive.")


__all__ = ["as_reply", "create_app", "app_from_environment"]


ECHO_LIMIT = 300  # characters of a refused value a 422 echoes


def _bounded_error(error: Any) -> Any:
    """A validation error item whose ``input`` is at most :data:`ECHO_LIMIT` characters of JSON."""
    encoded = jsonable_encoder(error)
    if "input" in encoded and len(json.dumps(encoded["input"], default=str)) > ECHO_LIMIT:
        encoded["input"] = shown(encoded["input"], ECHO_LIMIT)
    return encoded


def app_from_environment() -> FastAPI:
    """The app for each of several server processes (``--workers``): settings from the environment."""
    settings = StitchSettings()
    if not settings.database_url:
        raise RuntimeError("STITCH_DATABASE_URL is not set")
    return create_app(settings, settings.database_url)


LARGE_BODY = 64 * 1024  # a body at least this large is decoded on a thread, not on the event loop
_DECODING = anyio.CapacityLimiter(4)  # ... by at most this many at once


class StitchRequest(Request):
    """Decodes JSON bodies with Stitch's value rules (:func:`values.decode`)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                if len(body) < LARGE_BODY:
                    self._json = decode(body)
                else:  # a megabyte of nested arrays takes the loop most of a second
                    self._json = await anyio.to_thread.run_sync(decode, body, limiter=_DECODING)
            except BadJson as exc:
                raise HTTPException(422, exc.errors()) from None
        return self._json


class StitchRoute(APIRoute):
    """Stitch's JSON rules for bodies, and no query parameter the endpoint does not take."""

    def get_route_handler(self) -> Any:
        handler = super().get_route_handler()
        accepted = frozenset(field.alias for field in self.dependant.query_params)
        takes = ", ".join(sorted(accepted)) or "no query parameters"

        async def stitch_handler(request: Request) -> Response:
            stitch_request = StitchRequest(request.scope, request.receive)
            unknown = [name for name in stitch_request.query_params if name not in accepted]
            if unknown:
                return JSONResponse(
                    {
                        "detail": [
                            {
                                "loc": ["query", name],
                                "msg": f"unknown query parameter {shown(name)}; this endpoint takes {takes}",
                                "type": "extra_forbidden",
                            }
                            for name in dict.fromkeys(unknown)
                        ]
                    },
                    status_code=422,
                )
            return await handler(stitch_request)

        return stitch_handler


def create_app(settings: StitchSettings, database_url: str) -> FastAPI:
    """An app bound to one database; the lifespan opens it and runs the dispatcher."""
    settings.check_api_key()  # a blank or short key is refused before anything listens
    webhooks = settings.webhook_policy()
    keyed = (401,) if settings.api_key else ()
    retention = (
        Policy.of(settings.retention_max_age(), settings.retention_max_runs_per_flow, settings.retention_batch_size)
        if settings.retention_enabled
        else None
    )
    retention_reply = retention.describe() if retention is not None and retention.limits else None

    def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
        return errors(*codes, *keyed, 422, 503)  # any endpoint: a bad or unknown query parameter, the database

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = await anyio.to_thread.run_sync(Database, database_url)
        metrics.process_started()
        engine = Engine(
            db,
            settings.base_url or "",
            settings.secret,
            settings.lease_seconds,
            webhooks,
            node_timeout=settings.node_timeout,
        )
        dispatcher = Dispatcher(
            engine,
            timeout=settings.worker_timeout,
            poll_interval=settings.poll_interval,
            max_response_bytes=settings.worker_max_response_bytes,
        )
        app.state.engine, app.state.dispatcher, app.state.flows = engine, dispatcher, Flows(db, webhooks)
        app.state.callbacks = Callbacks(engine, GroupCommit(engine), dispatcher)
        app.state.feed = EventFeed(db)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)  # its first reconciler round resumes what a restart interrupted
            await tg.start(app.state.feed.run)
            if retention is not None and retention.limits:
                # Every process prunes: its batches are idempotent (see retention.py).
                pruner = Pruner(db, retention, settings.retention_interval_seconds, on_pruned=metrics.pruned)
                tg.start_soon(pruner.run)
            yield
            tg.cancel_scope.cancel()
        db.dispose()
        metrics.process_exiting()

    app = FastAPI(
        title="Stitch",
        description="Runs React Flow graphs with external workers.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )  # served below, behind the key when there is one
    app.router.route_class = StitchRoute
    app.add_middleware(AllowHeader)
    app.add_middleware(CallbackFastPath)  # inside the body limit (each middleware added wraps the ones before)
    app.add_middleware(  # a callback waits for its turn before its body is read
        CallbackAdmission,
        concurrency=settings.callback_concurrency,
        queue=settings.callback_queue,
        retry_after=settings.callback_retry_after,
    )
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    if settings.api_key:
        app.add_middleware(RequireKey, key=settings.api_key)  # outermost: a stranger's body is never read

    @app.exception_handler(RequestValidationError)
    async def request_refused(request: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's 422, with each refused value shortened: its default echoes the whole body."""
        return JSONResponse({"detail": [_bounded_error(error) for error in exc.errors()]}, status_code=422)

    @app.exception_handler(DBAPIError)
    async def database_error(request: Request, exc: DBAPIError) -> JSONResponse:
        if isinstance(exc, (OperationalError, InterfaceError)) or exc.connection_invalidated:
            log.warning("database unavailable: %s", str(exc.orig)[:300])
            return JSONResponse({"detail": "the Stitch database is unavailable; try again shortly"}, status_code=503)
        log.error("database error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse(
            {"detail": f"internal error ({type(exc.orig).__name__}); see the server log"}, status_code=500
        )

    @app.exception_handler(PoolTimeout)
    async def database_busy(request: Request, exc: PoolTimeout) -> JSONResponse:
        log.warning("no database connection free: %s", exc)
        return JSONResponse(
            {"detail": "the Stitch database is busy (no connection free); try again shortly"}, status_code=503
        )

    def engine_of(request: Request) -> Engine:
        engine: Engine = request.app.state.engine  # Starlette's State holds untyped attributes
        return engine

    def flows_of(request: Request) -> Flows:
        flows: Flows = request.app.state.flows
        return flows

    def answer(request: Request, result: Result, sendings: list[Sending]) -> JSONResponse:
        request.app.state.dispatcher.submit(sendings)
        return JSONResponse(result.reply(), status_code=result.outcome.http_status)

    async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        with answered_as_http():
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    # Work that may evaluate input schemas has threads of its own: however many such requests
    # arrive, the other endpoints keep theirs. Saving or checking a graph (a designer's work) and
    # starting a run or completing a gate (a run's) each have their own, so a flood of the one
    # never holds up the other. Each is stopped when its client leaves (bounded_schemas.CALLER_GONE).
    checking = anyio.CapacityLimiter(CHECKING_THREADS)
    designing = anyio.CapacityLimiter(DESIGNING_THREADS)

    async def checked(
        request: Request, fn: Any, *args: Any, limiter: anyio.CapacityLimiter = checking, **kwargs: Any
    ) -> Any:
        gone = threading.Event()

        def captured() -> tuple[Any, Exception | None]:  # raised here, not inside the task group
            try:
                return fn(*args, **kwargs), None
            except Exception as exc:
                return None, exc

        token = CALLER_GONE.set(gone)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_for_leaving, request, gone)
                value, error = await anyio.to_thread.run_sync(captured, limiter=limiter)
                tg.cancel_scope.cancel()
        finally:
            CALLER_GONE.reset(token)
        if isinstance(error, CallerGone):
            log.info(
                "%s %s: its client left during an input schema check, which stopped", request.method, request.url.path
            )
            raise HTTPException(499, "the client closed the request before its check ended; nothing changed")
        with answered_as_http():
            if error is not None:
                raise error
        return value

    async def watch_for_leaving(request: Request, gone: threading.Event) -> None:
        """Sets ``gone`` when the client disconnects (its body has been read: what comes next is that)."""
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone.set()

    def read(fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A short read (a page, a run, a count), on the event loop: on a thread, each of its
        steps in the driver would give the GIL away and wait to get it back from a busy event
        loop (and, on PostgreSQL, from the thread committing callbacks), many times per read.
        One read at a time holds at most one pooled connection, so it never waits for the pool."""
        with answered_as_http():
            return fn(*args, **kwargs)

    @contextmanager
    def answered_as_http() -> Iterator[None]:
        try:
            yield
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except (FlowBusy, FlowChanging) as exc:
            raise HTTPException(409, str(exc)) from None
        except queries.BadQuery as exc:
            raise HTTPException(422, [{"loc": ["query", exc.field], "msg": str(exc), "type": "value_error"}]) from None
        except GraphError as exc:
            raise HTTPException(422, [graph_problem(p) for p in exc.found]) from None
        except InputRefused as exc:
            raise HTTPException(422, exc.errors()) from None

    def graph_problem(problem: Problem) -> dict[str, Any]:
        item: dict[str, Any] = {
            "loc": ["body", "graph", *problem.loc],
            "msg": problem.message,
            "type": "graph",
            "rule": problem.rule,
        }
        for key in ("node_id", "edge_id", "field"):
            if getattr(problem, key) is not None:
                item[key] = getattr(problem, key)
        return item

    # -- flows ---------------------------------------------------------------------------------
    @app.post(f"{PREFIX}/flows", status_code=201, response_model=FlowReply, responses=documented(413))
    async def create_flow(body: FlowIn, request: Request) -> dict[str, Any]:
        """Save a flow (its version 1). The graph is checked first, as POST .../flows/validate
        checks it (node types and ids, edges, cycles, webhook targets, Splitter/Collector
        pairing, input schemas); a 422 names every problem, with its node or edge. The graph is
        kept as sent, key for key."""
        flows = flows_of(request)
        return as_reply(await checked(request, flows.create, body.name, body.graph, body.author, limiter=designing))

    @app.post(f"{PREFIX}/flows/validate", response_model=GraphCheck, responses=documented(413))
    async def validate_flow(
        request: Request, body: Annotated[Any, Body(), WithJsonSchema(VALIDATE_BODY)]
    ) -> dict[str, Any]:
        """Check a graph as saving it would, without saving it: ``valid``, every problem (each
        with its node or edge and field) and warnings (allowed, most likely not meant). Any
        graph that is JSON is answered 200, however broken."""
        graph = graph_to_check(body)
        verdict = await checked(request, flows_of(request).check, graph, limiter=designing)
        return {
            "valid": verdict.valid,
            "problems": [p.as_json() for p in verdict.problems],
            "warnings": [p.as_json() for p in verdict.warnings],
        }

    def graph_to_check(body: Any) -> Any:
        """The graph in a validate request: ``{"graph": ...}`` or a graph itself (it has ``nodes``)."""
        if isinstance(body, dict) and "nodes" in body:
            return body
        if isinstance(body, dict) and "graph" in body:
            unknown = [key for key in body if key != "graph"]
            if unknown:
                raise HTTPException(
                    422,
                    [
                        {
                            "loc": ["body", key],
                            "msg": f'unknown key {shown(key)}; send {{"graph": {{...}}}} alone, or the graph itself',
                            "type": "extra_forbidden",
                        }
                        for key in unknown
                    ],
                )
            return body["graph"]
        raise HTTPException(
            422,
            [
                {
                    "loc": ["body"],
                    "msg": 'send {"graph": {"nodes": [...], "edges": [...]}} or the graph itself '
                    f'{{"nodes": [...], "edges": [...]}} (got {shown(body, 60)})',
                    "type": "model_type",
                }
            ],
        )

    @app.get(f"{PREFIX}/flows", response_model=list[FlowListed], responses=documented())
    async def list_flows(request: Request) -> list[dict[str, Any]]:
        """Every flow that is not deleted, oldest first, with its node count and newest run."""
        listed = await call(flows_of(request).list)
        return [{**as_reply(flow), "last_run": flow["last_run"] and as_reply(flow["last_run"])} for flow in listed]

    @app.get(f"{PREFIX}/flows/{{flow_id}}", response_model=FlowReply, responses=documented(404))
    async def get_flow(flow_id: str, request: Request) -> dict[str, Any]:
        """One flow (a deleted flow is 404; its runs stay readable)."""
        return as_reply(await call(flows_of(request).get, flow_id))

    @app.put(f"{PREFIX}/flows/{{flow_id}}", response_model=FlowReply, responses=documented(404, 413))
    async def update_flow(flow_id: str, body: FlowUpdate, request: Request) -> dict[str, Any]:
        """Rename a flow or replace its graph (checked as on create): a new version, kept with
        its author. An update that changes neither keeps no version and answers the flow as it
        is. Runs under way keep their graph."""
        flows = flows_of(request)
        updated = await checked(request, flows.update, flow_id, body.name, body.graph, body.author, limiter=designing)
        return as_reply(updated)

    @app.get(f"{PREFIX}/flows/{{flow_id}}/versions", response_model=list[FlowVersionListed], responses=documented(404))
    async def flow_versions(flow_id: str, request: Request) -> list[dict[str, Any]]:
        """The flow's kept versions, newest first (a flow saved before versions were kept has
        them from the version it had then)."""
        return as_replies(await call(flows_of(request).versions, flow_id))

    @app.get(f"{PREFIX}/flows/{{flow_id}}/versions/{{version}}", response_model=FlowVersion, responses=documented(404))
    async def flow_version(
        flow_id: str, version: Annotated[int, Path(ge=1, le=VERSION_MAX)], request: Request
    ) -> dict[str, Any]:
        """One kept version of the flow, with its graph as it was saved; 404 names the versions kept."""
        return as_reply(await call(flows_of(request).version, flow_id, version))

    @app.get(f"{PREFIX}/flows/{{flow_id}}/diff", response_model=FlowDiff, responses=documented(404))
    async def flow_diff(
        flow_id: str,
        request: Request,
        before: Annotated[int, Query(alias="from", ge=1, le=VERSION_MAX, description="The earlier version.")],
        after: Annotated[int, Query(alias="to", ge=1, le=VERSION_MAX, description="The later version.")],
    ) -> dict[str, Any]:
        """What changed in the graph from version ``from`` to version ``to``: nodes and edges
        matched by id, added, removed, changed (the keys that changed) and, for nodes, moved
        (only the position changed)."""
        return dict(await call(flows_of(request).diff, flow_id, before, after))

    @app.delete(f"{PREFIX}/flows/{{flow_id}}", response_model=FlowDeleted, responses=documented(404, 409))
    async def delete_flow(
        flow_id: str,
        request: Request,
        force: Annotated[bool, Query(description="Cancel the flow's running and waiting runs, then delete.")] = False,
    ) -> dict[str, Any]:
        """Delete a flow: it leaves the list and reads 404, and no run can start from it; its
        runs stay readable. Refused (409, naming how many) while runs are running or waiting
        for a person, unless ``?force=true``, which cancels them first."""
        engine = engine_of(request)
        return as_reply(await call(flows_of(request).delete, flow_id, force=force, cancel=engine.cancel_run))

    @app.post(
        f"{PREFIX}/flows/{{flow_id}}/runs", status_code=201, response_model=RunReply, responses=documented(404, 413)
    )
    async def start_run(flow_id: str, request: Request, body: RunIn | None = None) -> dict[str, Any]:
        """Start a run of the flow's current version with this input; its root nodes fire at once.
        With the graph's ``inputSchema``, an input that does not fit it is a 422 naming each
        field, and no run starts."""
        run, sendings = await checked(request, engine_of(request).start_run, flow_id, body.input if body else None)
        request.app.state.dispatcher.submit(sendings)
        return as_reply(queries.run_view(run))

    # -- runs ----------------------------------------------------------------------------------
    @app.get(f"{PREFIX}/runs", response_model=RunPage, responses=documented())
    async def list_runs(
        request: Request,
        status: Annotated[RunStatus | None, Query(description="Only runs in this status.")] = None,
        flow_id: FlowIdQuery = None,
        cursor: Annotated[
            str | None,
            Query(
                description="The next_cursor of the previous page, unchanged; leave out for the "
                "first. Any other value is a 422.",
                json_schema_extra={"pattern": "^[A-Za-z0-9_-]+$"},
            ),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="Runs per page.")] = 100,
    ) -> dict[str, Any]:
        """Runs, newest first, a page at a time (pass ``next_cursor`` back as ``cursor``)."""
        page = read(
            queries.list_runs,
            engine_of(request).db,
            status=status,
            flow_id=flow_id,
            cursor=cursor,
            limit=limit,
        )
        return {"runs": as_replies(page["runs"]), "next_cursor": page["next_cursor"], "retention": retention_reply}

    @app.get(f"{PREFIX}/runs/waiting", response_model=list[WaitingGate], responses=documented())
    async def waiting_runs(
        request: Request,
        flow_id: FlowIdQuery = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many gates.")] = 100,
    ) -> list[dict[str, Any]]:
        """UX gates waiting for a person, longest waiting first, each with its ``data.prompt`` and
        ``data.inputSchema``."""
        return as_replies(await call(queries.waiting, engine_of(request).db, flow_id=flow_id, limit=limit))

    async def started(feed: EventFeed, subscription: Subscription) -> None:
        try:
            await feed.started()
        except BaseException as exc:
            feed.unsubscribe(subscription)
            if isinstance(exc, TimeoutError):
                raise HTTPException(503, "the Stitch database is unavailable; try again shortly") from None
            raise

    def event_stream(request: Request, subscription: Subscription, first: list[Message]) -> StreamingResponse:
        return StreamingResponse(
            stream(request.app.state.feed, subscription, first),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.get(f"{PREFIX}/runs/stream", response_class=StreamingResponse, responses={**documented(), **SSE_REPLY})
    async def runs_stream(
        request: Request,
        flow_id: FlowIdQuery = None,
    ) -> StreamingResponse:
        """Server-sent events: an ``event: run`` message (data: a run summary, as in GET
        /api/stitch/runs) whenever a run starts or changes, from any server process on the
        database, within about 0.1 s. Nothing is replayed: list the runs first, then listen."""
        if flow_id is not None:
            await call(queries.runs_query, flow_id=flow_id)  # a malformed flow id is a 422 before streaming
        feed: EventFeed = request.app.state.feed
        subscription = feed.subscribe(flow_id=flow_id and flow_id.lower())
        await started(feed, subscription)  # what happens after the answer starts is sent
        return event_stream(request, subscription, [])

    @app.get(
        f"{PREFIX}/runs/{{run_id}}/stream", response_class=StreamingResponse, responses={**documented(404), **SSE_REPLY}
    )
    async def run_stream(
        run_id: str,
        request: Request,
        after: Annotated[
            int | None,
            Query(
                ge=0,
                le=EVENT_ID_MAX,
                description="Send the events after this event id first (default: "
                "the Last-Event-ID header, else every event of the run).",
            ),
        ] = None,
    ) -> StreamingResponse:
        """Server-sent events: the run's events as ``event: node`` messages (``id:`` the event id;
        data: the event as in .../events plus ``run_status``), first those after ``after``, then
        live ones as they are committed by any server process. Reconnect with ``after`` (or
        ``Last-Event-ID``) set to the last id seen and nothing is lost or repeated."""
        run_id = (await call(queries.get_run_status, engine_of(request).db, run_id))["id"]
        feed: EventFeed = request.app.state.feed
        subscription = feed.subscribe(run_id=run_id)
        await started(feed, subscription)
        try:
            first = await call(feed.replay, run_id, last_event_id(after, request.headers.get("last-event-id")))
        except BaseException:
            feed.unsubscribe(subscription)
            raise
        return event_stream(request, subscription, first)

    @app.get(f"{PREFIX}/runs/{{run_id}}", response_model=RunReply, responses=documented(404))
    async def get_run(run_id: str, request: Request) -> dict[str, Any]:
        """The run and the latest state of each node path (every attempt: .../nodes/{node}/attempts)."""
        return as_reply(queries.run_view(read(queries.get_run, engine_of(request).db, run_id)))

    @app.get(f"{PREFIX}/runs/{{run_id}}/events", response_model=list[RunEvent], responses=documented(404))
    async def run_events(run_id: str, request: Request) -> list[dict[str, Any]]:
        """The run's event log, oldest first."""
        return as_replies(await call(queries.run_events, engine_of(request).db, run_id))

    @app.get(
        f"{PREFIX}/runs/{{run_id}}/nodes/{{node_id}}/attempts",
        response_model=list[AttemptReply],
        responses=documented(404),
    )
    async def node_attempts(run_id: str, node_id: str, request: Request) -> list[dict[str, Any]]:
        """Every attempt of a node path, oldest first (a fan-out node's id: all its paths')."""
        return as_replies(await call(queries.node_attempts, engine_of(request).db, run_id, node_id))

    @app.post(f"{PREFIX}/runs/{{run_id}}/cancel", response_model=EventReply, responses=documented(404, 409))
    async def cancel_run(run_id: str, request: Request) -> JSONResponse:
        """Cancel a running or waiting run: unfinished nodes become cancelled, nothing more is
        sent, late callbacks get 409. Cancelling it again is a harmless duplicate; a finished
        run is 409."""
        result, sendings = await call(engine_of(request).cancel_run, run_id)
        return answer(request, result, sendings)

    # -- events on a run -------------------------------------------------------------------------
    @app.post(
        f"{PREFIX}/callback/{{run_id}}/{{node_id}}",
        response_model=EventReply,
        responses=errors(400, 403, 404, 409, 413, 422, 503),
    )
    async def callback(
        run_id: str,
        node_id: str,
        body: Callback,
        request: Request,
        attempt: Annotated[int | None, Query()] = None,
        sig: Annotated[str | None, Query()] = None,
    ) -> JSONResponse:
        """A worker's answer, posted to the signed callbackUrl it was given. A repeat is a
        harmless 200 (``duplicate``); an answer for an attempt that has moved on is 409."""
        callbacks: Callbacks = request.app.state.callbacks
        try:
            if attempt is None or sig is None:
                raise NotSigned
            result = await callbacks.receive(run_id, node_id, attempt, sig, body)
        except NotSigned as exc:
            raise HTTPException(403, str(exc)) from None
        return JSONResponse(result.reply(), status_code=result.outcome.http_status)

    @app.post(
        f"{PREFIX}/complete/{{run_id}}/{{node_id}}",
        response_model=EventReply,
        responses=documented(400, 404, 409, 413, 415),
    )
    async def complete(
        run_id: str, node_id: str, request: Request, body: Annotated[JsonValue, Body()] = None
    ) -> JSONResponse:
        """Complete a UX node that is waiting for a person; the body is its output. With the
        node's ``data.inputSchema`` (in the graph the run started with), a body that does not
        fit it is a 422 naming each field, and the node keeps waiting."""
        if isinstance(body, bytes):  # a body that was not sent as JSON
            raise HTTPException(415, "send the output as JSON, with 'Content-Type: application/json'")
        result, sendings = await checked(request, engine_of(request).complete, run_id, node_id, body)
        return answer(request, result, sendings)

    @app.post(f"{PREFIX}/retry/{{run_id}}/{{node_id}}", response_model=EventReply, responses=documented(400, 404, 409))
    async def retry(run_id: str, node_id: str, request: Request) -> JSONResponse:
        """Fire a failed node path again (a new attempt); a fan-out node's id retries its failed paths."""
        result, sendings = await call(engine_of(request).retry, run_id, node_id)
        return answer(request, result, sendings)

    # -- docs and health -------------------------------------------------------------------------
    plain_openapi = app.openapi

    def openapi_with_json_value() -> dict[str, Any]:
        if app.openapi_schema is None:
            plain = plain_openapi()
            # The flow endpoints point at the Graph schema without validating through it (checks.py does).
            components = plain.setdefault("components", {}).setdefault("schemas", {})
            graph_schema = Graph.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, definition in {**graph_schema.pop("$defs", {}), "Graph": graph_schema}.items():
                components.setdefault(name, definition)
            plain["components"]["schemas"] = dict(sorted(components.items()))
            schema = with_json_value(plain)
            schema.setdefault("components", {}).setdefault("schemas", {})["JsonValue"] = JSON_VALUE_SCHEMA
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi_with_json_value  # type: ignore[method-assign]  # FastAPI's documented way to extend it

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Stitch",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},  # no call to validator.swagger.io
        )

    from swagger_ui_bundle import swagger_ui_path  # the package's files: Swagger UI 5 (renders OpenAPI 3.1)

    app.mount(DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")
    if not console.mount(app):
        log.info("the web console is not built in %s; / says how to add it", console.CONSOLE_DIR)

    @app.get(f"{PREFIX}/health", response_model=Health, responses=errors(422, 503))
    async def health(request: Request) -> dict[str, Any]:
        """Open without the API key (load balancers probe it)."""
        engine = engine_of(request)
        pending = read(engine.pending_dispatches)
        return {
            "status": "ok",
            "database": engine.db.name,
            "schema_version": engine.db.version,
            "pending_dispatches": pending,
        }

    @app.get("/metrics", include_in_schema=False)  # Prometheus's path and format, not the JSON API
    async def prometheus_metrics(request: Request) -> Response:
        engine = engine_of(request)
        backlog = read(engine.backlog)
        metrics.pool_in_use(engine.db.connections_in_use())
        body = await anyio.to_thread.run_sync(metrics.render, backlog)
        return Response(body, media_type=metrics.CONTENT_TYPE)

    return app
