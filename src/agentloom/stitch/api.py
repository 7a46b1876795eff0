"""The Stitch HTTP API (FastAPI). Everything lives under /api/stitch; OpenAPI docs at /docs."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import Body, Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from agentloom.stitch.db import Database
from agentloom.stitch.dispatcher import Dispatcher
from agentloom.stitch.engine import Engine, NotFound, Sending
from agentloom.stitch.execution import Outcome, Result
from agentloom.stitch.graph import GraphError
from agentloom.stitch.models import Callback, Graph
from agentloom.stitch.settings import StitchSettings

PREFIX = "/api/stitch"


class FlowIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    graph: Graph


class FlowUpdate(BaseModel):
    name: str | None = Field(None, min_length=1, max_length=200)
    graph: Graph | None = None


class RunIn(BaseModel):
    input: Any = None


def app_from_environment() -> FastAPI:
    """The app for each of several server processes (``--workers``): settings from the environment."""
    settings = StitchSettings()
    if not settings.database_url:
        raise RuntimeError("STITCH_DATABASE_URL is not set")
    return create_app(settings, settings.database_url)


def create_app(settings: StitchSettings, database_url: str) -> FastAPI:
    """An app bound to one database; the lifespan opens it and runs the dispatcher."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = await anyio.to_thread.run_sync(Database, database_url)
        engine = Engine(db, settings.base_url or "", settings.secret, settings.lease_seconds)
        dispatcher = Dispatcher(engine, timeout=settings.worker_timeout, poll_interval=settings.poll_interval)
        app.state.engine, app.state.dispatcher = engine, dispatcher
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)  # its first reconciler round resumes what a restart interrupted
            yield
            tg.cancel_scope.cancel()
        db.dispose()

    app = FastAPI(title="Stitch", description="Runs React Flow graphs with external workers.", lifespan=lifespan)

    def authorised(
        authorization: Annotated[str | None, Header()] = None,
        x_api_key: Annotated[str | None, Header()] = None,
    ) -> None:
        if not settings.api_key:
            return
        given = x_api_key or (authorization or "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), settings.api_key.encode()):
            raise HTTPException(401, "missing or wrong API key: send 'Authorization: Bearer <STITCH_API_KEY>'")

    manage = [Depends(authorised)]

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

    @app.post(f"{PREFIX}/flows", status_code=201, dependencies=manage)
    async def create_flow(body: FlowIn, request: Request) -> dict[str, Any]:
        return await call(engine_of(request).create_flow, body.name, body.graph)  # type: ignore[no-any-return]

    @app.get(f"{PREFIX}/flows", dependencies=manage)
    async def list_flows(request: Request) -> list[dict[str, Any]]:
        return await call(engine_of(request).list_flows)  # type: ignore[no-any-return]

    @app.get(f"{PREFIX}/flows/{{flow_id}}", dependencies=manage)
    async def get_flow(flow_id: str, request: Request) -> dict[str, Any]:
        return await call(engine_of(request).get_flow, flow_id)  # type: ignore[no-any-return]

    @app.put(f"{PREFIX}/flows/{{flow_id}}", dependencies=manage)
    async def update_flow(flow_id: str, body: FlowUpdate, request: Request) -> dict[str, Any]:
        return await call(engine_of(request).update_flow, flow_id, body.name, body.graph)  # type: ignore[no-any-return]

    @app.post(f"{PREFIX}/flows/{{flow_id}}/runs", status_code=201, dependencies=manage)
    async def start_run(flow_id: str, request: Request, body: RunIn | None = None) -> dict[str, Any]:
        run, sendings = await call(engine_of(request).start_run, flow_id, body.input if body else None)
        request.app.state.dispatcher.submit(sendings)
        return run  # type: ignore[no-any-return]

    @app.get(f"{PREFIX}/runs", dependencies=manage)
    async def list_runs(request: Request, flow_id: str | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict[str, Any]]:
        return await call(engine_of(request).list_runs, flow_id, limit)  # type: ignore[no-any-return]

    @app.get(f"{PREFIX}/runs/{{run_id}}", dependencies=manage)
    async def get_run(run_id: str, request: Request) -> dict[str, Any]:
        return await call(engine_of(request).get_run, run_id)  # type: ignore[no-any-return]

    @app.get(f"{PREFIX}/runs/{{run_id}}/events", dependencies=manage)
    async def run_events(run_id: str, request: Request) -> list[dict[str, Any]]:
        return await call(engine_of(request).run_events, run_id)  # type: ignore[no-any-return]

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

    @app.post(f"{PREFIX}/complete/{{run_id}}/{{node_id}}", dependencies=manage)
    async def complete(run_id: str, node_id: str, request: Request, body: Annotated[Any, Body()] = None) -> JSONResponse:
        result, sendings = await call(engine_of(request).complete, run_id, node_id, body)
        return answer(request, result, sendings)

    @app.post(f"{PREFIX}/retry/{{run_id}}/{{node_id}}", dependencies=manage)
    async def retry(run_id: str, node_id: str, request: Request) -> JSONResponse:
        result, sendings = await call(engine_of(request).retry, run_id, node_id)
        return answer(request, result, sendings)

    @app.get(f"{PREFIX}/health")
    async def health(request: Request) -> dict[str, Any]:
        engine = engine_of(request)
        pending = await call(engine.pending_dispatches)
        return {"status": "ok", "database": engine.db.name, "schema_version": engine.db.version, "pending_dispatches": pending}

    return app
