"""The echo worker of the Stitch benchmark: answers every webhook at once and records when.

Run as ``python -m benchmarks.stitch_worker PORT``; GET /stats returns the timings.
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

received: dict[str, float] = {}  # "run/node" -> when its webhook arrived
answered: dict[str, float] = {}  # "run/node" -> when its callback was sent
client: aiohttp.ClientSession | None = None
tasks: set[asyncio.Task[Any]] = set()


async def work(request: Request) -> JSONResponse:
    payload = await request.json()
    received[f"{payload['runId']}/{payload['nodeId']}"] = time.time()
    task = asyncio.get_running_loop().create_task(answer(payload))
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return JSONResponse({"accepted": True})


async def answer(payload: dict[str, Any]) -> None:
    global client
    if client is None:
        client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200))
    answered[f"{payload['runId']}/{payload['nodeId']}"] = time.time()
    async with client.post(
        payload["callbackUrl"], json={"status": "completed", "output": payload["input"]}
    ) as response:
        await response.read()


async def stats(_: Request) -> JSONResponse:
    return JSONResponse({"received": received, "answered": answered})


async def reset(_: Request) -> JSONResponse:
    received.clear()
    answered.clear()
    return JSONResponse({})


app = Starlette(
    routes=[Route("/work", work, methods=["POST"]), Route("/stats", stats), Route("/reset", reset, methods=["POST"])]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
