"""The Stitch HTTP API (FastAPI). Everything lives under /api/stitch; OpenAPI docs at /docs.

What reaches the engine has passed, in this order: the body size limit (413, from the
Content-Length header or while the body streams in, before it is parsed), JSON decoding with
Stitch's value rules (:mod:`values`: 422 naming the JSON path), the request models, and for
flows the graph checks (node ids, webhook targets). Nothing is written before all of them.
With ``STITCH_API_KEY`` set, every endpoint but the callbacks and health needs the key,
``/docs`` and ``/openapi.json`` included (the API description is not public on a server
that is not). A database that cannot be reached answers 503, so clients can tell an outage
from a request that failed.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import Body, FastAPI, HTTPException, Query, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentloom.core.timestamps import iso, parse
from agentloom.stitch.db import Database
from agentloom.stitch.dispatcher import Dispatcher
from agentloom.stitch.engine import Engine, NotFound, Sending
from agentloom.stitch.execution import Outcome, Result
from agentloom.stitch.graph import GraphError
from agentloom.stitch.models import Callback, Graph
from agentloom.stitch.settings import StitchSettings
from agentloom.stitch.values import BadJson, decode

PREFIX = "/api/stitch"
log = logging.getLogger(__name__)


class FlowIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    graph: Graph


class FlowUpdate(BaseModel):
    name: str | None = Field(None, min_length=1, max_length=200)
    graph: Graph | None = None


class RunIn(BaseModel):
    input: Any = None


STAMPS = ("created_at", "updated_at", "at")  # the row columns that are moments


def as_reply(row: Mapping[str, Any]) -> dict[str, Any]:
    """A flow, run or event row as a reply: every moment in the one timestamp format
    (``2026-11-23T11:32:00.123Z``), whatever the database returned (SQLite: naive UTC;
    PostgreSQL: the session's zone), node states' ``updated_at`` included (runs saved by
    older versions hold other ISO 8601 forms)."""
    out = dict(row)
    for key in STAMPS:
        if isinstance(out.get(key), datetime):
            out[key] = iso(out[key])
    states = out.get("node_states")
    if isinstance(states, dict):
        out["node_states"] = {key: _state(value) for key, value in states.items()}
    return out


def _state(state: Any) -> Any:
    stamp = state.get("updated_at") if isinstance(state, dict) else None
    if not isinstance(stamp, str):
        return state
    try:
        return {**state, "updated_at": iso(parse(stamp))}
    except ValueError:
        return state


def app_from_environment() -> FastAPI:
    """The app for each of several server processes (``--workers``): settings from the environment."""
    settings = StitchSettings()
    if not settings.database_url:
        raise RuntimeError("STITCH_DATABASE_URL is not set")
    return create_app(settings, settings.database_url)


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes (STITCH_MAX_BODY_BYTES)")


class BodyLimit:
    """Refuses a body above ``limit`` bytes before it is parsed: at once when Content-Length
    says so, otherwise as soon as the bytes received pass the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.limit:
                    await self._refuse(scope, send)
                    return
                break
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLarge:  # read outside a route (a route's own reading answers 413 itself)
            if started:
                raise
            await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        response = JSONResponse({"detail": BodyTooLarge(self.limit).detail}, status_code=413, headers={"Connection": "close"})
        await response(scope, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


class RequireKey:
    """With ``STITCH_API_KEY`` set, every path needs the key except the callbacks (their URLs
    are signed) and the health check. New endpoints are therefore protected by default."""

    OPEN_PREFIX = f"{PREFIX}/callback/"
    OPEN_PATHS = frozenset({f"{PREFIX}/health"})

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._open(scope["path"]) and not self._authorised(scope["headers"]):
            response = JSONResponse({"detail": "missing or wrong API key: send 'Authorization: Bearer <STITCH_API_KEY>'"},
                                    status_code=401, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _open(self, path: str) -> bool:
        return path.startswith(self.OPEN_PREFIX) or path in self.OPEN_PATHS

    def _authorised(self, headers: list[tuple[bytes, bytes]]) -> bool:
        given = b""
        for name, value in headers:
            if name == b"x-api-key":
                given = value.strip()
                break
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                given = value[7:].strip()
        return hmac.compare_digest(given, self.key)


class StitchRequest(Request):
    """Decodes JSON bodies with Stitch's value rules (:func:`values.decode`)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = decode(await self.body())
            except BadJson as exc:
                raise HTTPException(422, exc.errors()) from None
        return self._json


class StitchRoute(APIRoute):
    def get_route_handler(self) -> Any:
        handler = super().get_route_handler()

        async def stitch_handler(request: Request) -> Response:
            return await handler(StitchRequest(request.scope, request.receive))

        return stitch_handler


def create_app(settings: StitchSettings, database_url: str) -> FastAPI:
    """An app bound to one database; the lifespan opens it and runs the dispatcher."""
    settings.check_api_key()  # a blank or short key is refused before anything listens
    webhooks = settings.webhook_policy()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = await anyio.to_thread.run_sync(Database, database_url)
        engine = Engine(db, settings.base_url or "", settings.secret, settings.lease_seconds, webhooks)
        dispatcher = Dispatcher(engine, timeout=settings.worker_timeout, poll_interval=settings.poll_interval)
        app.state.engine, app.state.dispatcher = engine, dispatcher
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)  # its first reconciler round resumes what a restart interrupted
            yield
            tg.cancel_scope.cancel()
        db.dispose()

    app = FastAPI(title="Stitch", description="Runs React Flow graphs with external workers.", lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)  # served below, behind the key when there is one
    app.router.route_class = StitchRoute
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    if settings.api_key:
        app.add_middleware(RequireKey, key=settings.api_key)  # outermost: a stranger's body is never read

    @app.exception_handler(DBAPIError)
    async def database_error(request: Request, exc: DBAPIError) -> JSONResponse:
        if isinstance(exc, (OperationalError, InterfaceError)) or exc.connection_invalidated:
            log.warning("database unavailable: %s", str(exc.orig)[:300])
            return JSONResponse({"detail": "the Stitch database is unavailable; try again shortly"}, status_code=503)
        log.error("database error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"detail": f"internal error ({type(exc.orig).__name__}); see the server log"}, status_code=500)

    @app.exception_handler(PoolTimeout)
    async def database_busy(request: Request, exc: PoolTimeout) -> JSONResponse:
        log.warning("no database connection free: %s", exc)
        return JSONResponse({"detail": "the Stitch database is busy (no connection free); try again shortly"}, status_code=503)

    def engine_of(request: Request) -> Engine:
        return request.app.state.engine  # type: ignore[no-any-return]

    def answer(request: Request, result: Result, sendings: list[Sending]) -> JSONResponse:
        request.app.state.dispatcher.submit(sendings)
        body = {"ok": result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE), "detail": result.message,
                "duplicate": result.outcome is Outcome.DUPLICATE}
        return JSONResponse(body, status_code=result.outcome.http_status)

    async def call(fn: Any, *args: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(fn, *args)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except GraphError as exc:
            raise HTTPException(422, [{"loc": ["body", "graph"], "msg": p, "type": "graph"} for p in exc.problems]) from None

    @app.post(f"{PREFIX}/flows", status_code=201)
    async def create_flow(body: FlowIn, request: Request) -> dict[str, Any]:
        return as_reply(await call(engine_of(request).create_flow, body.name, body.graph))

    @app.get(f"{PREFIX}/flows")
    async def list_flows(request: Request) -> list[dict[str, Any]]:
        return [as_reply(flow) for flow in await call(engine_of(request).list_flows)]

    @app.get(f"{PREFIX}/flows/{{flow_id}}")
    async def get_flow(flow_id: str, request: Request) -> dict[str, Any]:
        return as_reply(await call(engine_of(request).get_flow, flow_id))

    @app.put(f"{PREFIX}/flows/{{flow_id}}")
    async def update_flow(flow_id: str, body: FlowUpdate, request: Request) -> dict[str, Any]:
        return as_reply(await call(engine_of(request).update_flow, flow_id, body.name, body.graph))

    @app.post(f"{PREFIX}/flows/{{flow_id}}/runs", status_code=201)
    async def start_run(flow_id: str, request: Request, body: RunIn | None = None) -> dict[str, Any]:
        run, sendings = await call(engine_of(request).start_run, flow_id, body.input if body else None)
        request.app.state.dispatcher.submit(sendings)
        return as_reply(run)

    @app.get(f"{PREFIX}/runs")
    async def list_runs(request: Request, flow_id: str | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict[str, Any]]:
        return [as_reply(run) for run in await call(engine_of(request).list_runs, flow_id, limit)]

    @app.get(f"{PREFIX}/runs/{{run_id}}")
    async def get_run(run_id: str, request: Request) -> dict[str, Any]:
        return as_reply(await call(engine_of(request).get_run, run_id))

    @app.get(f"{PREFIX}/runs/{{run_id}}/events")
    async def run_events(run_id: str, request: Request) -> list[dict[str, Any]]:
        return [as_reply(event) for event in await call(engine_of(request).run_events, run_id)]

    @app.post(f"{PREFIX}/callback/{{run_id}}/{{node_id}}")
    async def callback(
        run_id: str, node_id: str, body: Callback, request: Request,
        attempt: Annotated[int | None, Query()] = None, sig: Annotated[str | None, Query()] = None,
    ) -> JSONResponse:
        engine = engine_of(request)
        if attempt is None or sig is None or not engine.signer.verify(run_id, node_id, attempt, sig):
            raise HTTPException(403, "callback URL is not signed by this server: post to the callbackUrl you were given, unchanged")
        result, sendings = await call(engine.callback, run_id, node_id, attempt, body.status, body.output, body.error)
        return answer(request, result, sendings)

    @app.post(f"{PREFIX}/complete/{{run_id}}/{{node_id}}")
    async def complete(run_id: str, node_id: str, request: Request, body: Annotated[Any, Body()] = None) -> JSONResponse:
        if isinstance(body, bytes):  # a body that was not sent as JSON
            raise HTTPException(415, "send the output as JSON, with 'Content-Type: application/json'")
        result, sendings = await call(engine_of(request).complete, run_id, node_id, body)
        return answer(request, result, sendings)

    @app.post(f"{PREFIX}/retry/{{run_id}}/{{node_id}}")
    async def retry(run_id: str, node_id: str, request: Request) -> JSONResponse:
        result, sendings = await call(engine_of(request).retry, run_id, node_id)
        return answer(request, result, sendings)

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="Stitch")

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title="Stitch")

    @app.get(f"{PREFIX}/health")
    async def health(request: Request) -> dict[str, Any]:
        engine = engine_of(request)
        pending = await call(engine.pending_dispatches)
        return {"status": "ok", "database": engine.db.name, "schema_version": engine.db.version, "pending_dispatches": pending}

    return app
