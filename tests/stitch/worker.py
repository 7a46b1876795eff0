"""A real HTTP worker on 127.0.0.1 for the tests and the benchmark.

It accepts Stitch's webhook and calls back according to ``config.mode``: ``echo`` (at once,
output = input), ``late`` (after ``config.delay`` seconds, times the input when
``config.delayByInput``), ``twice`` (the same callback two times), ``fail`` (status failed),
``flaky`` (fails the first time it sees a node, then echoes), ``never`` (accept and stay
silent), ``reject`` (answer 500), ``slow`` (answer the webhook itself only after
``config.delay`` seconds), ``hold`` (answer the webhook only once the test calls
``release()``), ``spray`` (post the callback to every base URL in
``config.servers`` at once), ``garbage`` (answer 500 with a long body full of NULs and
terminal escapes). ``config.failOn`` fails the paths whose input equals it.
Every webhook received is recorded, so tests can count dispatches, and so is the HTTP status
each callback was answered with (``answers``: node key, attempt, status). ``POST /hop`` answers
307 to ``/work`` (a redirect, which Stitch must not follow) and records nothing.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conftest import free_port


class Worker:
    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/work"
        self.received: list[dict[str, Any]] = []
        self.answers: list[tuple[str, int, int]] = []  # (node key, attempt, HTTP status of the callback's answer)
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._client: httpx.AsyncClient | None = None
        self._server = uvicorn.Server(
            uvicorn.Config(
                Starlette(
                    routes=[Route("/work", self._work, methods=["POST"]), Route("/hop", self._hop, methods=["POST"])]
                ),
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                lifespan="off",
                # Longer than any pause in a test: a loaded machine runs uvicorn's keep-alive timers
                # late, and a connection it closes just as Stitch reuses it is reset, which a test
                # would see as an unreachable worker.
                timeout_keep_alive=120,
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> Worker:
        self._thread.start()
        while not self._server.started:
            threading.Event().wait(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._server.should_exit = True
        self._thread.join(timeout=10)

    async def _work(self, request: Request) -> Response:
        payload = await request.json()
        with self._lock:
            self.received.append(payload)
        mode = payload["config"].get("mode", "echo")
        if mode == "reject":
            return Response("nope", status_code=500)
        if mode == "garbage":
            return Response(b"\x00\x1b[31mboom\x07\r\n\x00" * 4000 + b"\xff\xfe tail", status_code=500)
        if mode == "hold":
            await asyncio.to_thread(self._released.wait, 300)
            return JSONResponse({"accepted": True})
        if mode == "slow":
            await asyncio.sleep(float(payload["config"].get("delay", 5)))
            return JSONResponse({"accepted": True})
        if mode == "flaky":
            with self._lock:
                seen = sum(1 for p in self.received if p["nodeId"] == payload["nodeId"])
            mode = "fail" if seen == 1 else "echo"
        if mode != "never":
            asyncio.get_running_loop().create_task(self._answer(payload, mode))
        return JSONResponse({"accepted": True})

    async def _hop(self, request: Request) -> Response:
        return Response(status_code=307, headers={"Location": self.url})

    async def _answer(self, payload: dict[str, Any], mode: str) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=30)
        config = payload["config"]
        if mode == "late":
            delay = float(config.get("delay", 0.5))
            await asyncio.sleep(delay * float(payload["input"]) if config.get("delayByInput") else delay)
        failed = mode == "fail" or ("failOn" in config and payload["input"] == config["failOn"])
        status = "failed" if failed else "completed"
        body = {
            "status": status,
            "output": payload["input"],
            "error": "the worker was told to fail" if failed else None,
        }
        url = payload["callbackUrl"]
        if mode == "spray":
            path = url.split("/api/stitch/", 1)[1]
            await asyncio.gather(
                *(self._client.post(f"{base}/api/stitch/{path}", json=body) for base in config["servers"])
            )
            return
        attempt = int(url.rsplit("attempt=", 1)[1].split("&", 1)[0])
        for _ in range(2 if mode == "twice" else 1):
            response = await self._client.post(url, json=body)
            with self._lock:
                self.answers.append((payload["nodeId"], attempt, response.status_code))

    def release(self) -> None:
        """Answer the webhooks held in mode ``hold`` (and every later one at once)."""
        self._released.set()

    def keys(self) -> list[str]:
        with self._lock:
            return [p["nodeId"] for p in self.received]
