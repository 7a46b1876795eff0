"""The echo worker of the Stitch benchmarks: answers every webhook at once and records when.

Run as ``python -m benchmarks.stitch_worker PORT``; GET /stats returns the timings, GET /finished
the runs whose last node (``config.last``) was answered 200 since the last call, GET /counts how
callbacks went, with the callbacks still being posted and the last that failed. A callback
answered 503 is posted again after its ``Retry-After``, as every Stitch worker should
(docs/stitch.md); any other non-2xx answer is counted as an error.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import aiohttp
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

RECORD = "--no-timings" not in sys.argv  # a long soak keeps no per-node timings
received: dict[str, float] = {}  # "run/node" -> when its webhook arrived
answered: dict[str, float] = {}  # "run/node" -> when its callback was sent
finished: list[str] = []  # runs whose last node's callback was answered 200, not yet collected
failed: list[str] = []  # the callbacks that failed, and how
counts = {"callbacks": 0, "retried_503": 0, "errors": 0, "webhooks": 0}
posting: dict[str, float] = {}  # "run/node" -> when its callback's post began, until it is answered
client: aiohttp.ClientSession | None = None
tasks: set[asyncio.Task[Any]] = set()


async def work(request: Request) -> JSONResponse:
    payload = await request.json()
    counts["webhooks"] += 1
    if RECORD:
        received[f"{payload['runId']}/{payload['nodeId']}"] = time.time()
    task = asyncio.get_running_loop().create_task(answer(payload))
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return JSONResponse({"accepted": True})


async def answer(payload: dict[str, Any]) -> None:
    global client
    if client is None:
        client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200))
    key = f"{payload['runId']}/{payload['nodeId']}"
    if RECORD:
        answered[key] = time.time()
    posting[key] = time.time()
    try:
        status = await post(client, payload["callbackUrl"], {"status": "completed", "output": payload["input"]}, key)
    finally:
        posting.pop(key, None)
    if status is None:
        return
    counts["callbacks"] += 1
    if status != 200:
        counts["errors"] += 1
        failed.append(f"{key}: HTTP {status}")
    elif (payload.get("config") or {}).get("last"):
        finished.append(payload["runId"])


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any], key: str) -> int | None:
    """The callback's final HTTP status (a 503 with Retry-After posted again), or None when it failed."""
    while True:
        try:
            async with session.post(url, json=body) as response:
                await response.read()
                status, retry_after = response.status, response.headers.get("Retry-After")
        except (TimeoutError, aiohttp.ClientError) as exc:
            counts["errors"] += 1
            failed.append(f"{key}: {type(exc).__name__}: {exc}"[:300])
            return None
        if status == 503 and retry_after is not None:
            counts["retried_503"] += 1
            await asyncio.sleep(float(retry_after))
            continue
        return status


async def stats(_: Request) -> JSONResponse:
    return JSONResponse({"received": received, "answered": answered})


async def collect(_: Request) -> JSONResponse:
    done = finished[:]
    finished.clear()
    return JSONResponse(done)


async def counted(_: Request) -> JSONResponse:
    now = time.time()
    oldest = sorted(posting.items(), key=lambda item: item[1])[:20]
    return JSONResponse(
        {
            **counts,
            "posting": len(posting),
            "posting_oldest": [f"{key}: {now - began:.1f} s" for key, began in oldest],
            "failed": failed[-20:],
        }
    )


async def reset(_: Request) -> JSONResponse:
    received.clear()
    answered.clear()
    return JSONResponse({})


app = Starlette(
    routes=[
        Route("/work", work, methods=["POST"]),
        Route("/stats", stats),
        Route("/finished", collect),
        Route("/counts", counted),
        Route("/reset", reset, methods=["POST"]),
    ]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
