"""The floor of the Stitch benchmark: the least an honest engine does per completion, as one
process, so Stitch's rate can be stated as a ratio to it measured in the same run.

Per completion: one transaction that checks the node's attempt and state, stores the output,
appends an event and marks the next node (SQLite in WAL with synchronous=NORMAL, on the event
loop; PostgreSQL with its defaults, one connection); an HMAC-signed callback URL checked in
constant time; a size-limited body parsed as JSON once; the next webhook out through a pooled
aiohttp client after the commit; the callback in through uvicorn and a bare ASGI callable.
Run as ``python -m benchmarks.stitch_floor PORT DATABASE WEBHOOK_URL`` (DATABASE: a SQLite
path or a postgresql:// URL). POST /start {"input": x} starts a run of a CHAIN-Worker chain;
GET /done counts completed runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import sqlite3
import sys
import time
import uuid
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import psycopg
import uvicorn

CHAIN, MAX_BODY, SECRET = 10, 1 << 20, os.urandom(32)
SCHEMA = [
    "DROP TABLE IF EXISTS runs",
    "DROP TABLE IF EXISTS nodes",
    "DROP TABLE IF EXISTS events",
    "CREATE TABLE runs (id TEXT PRIMARY KEY, status TEXT NOT NULL)",
    "CREATE TABLE nodes (run_id TEXT, key TEXT, attempt INTEGER NOT NULL, state TEXT NOT NULL, input TEXT, "
    "output TEXT, PRIMARY KEY (run_id, key))",
    "CREATE TABLE events (id {serial} PRIMARY KEY, run_id TEXT NOT NULL, key TEXT NOT NULL, status TEXT NOT NULL, "
    "at DOUBLE PRECISION NOT NULL)",
]
Query = Any  # async (sql, args) -> first row or None


class Lite:
    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        for sql in SCHEMA:
            self.db.execute(sql.format(serial="INTEGER"))

    async def run(self, work: Any) -> Any:
        async def q(sql: str, args: tuple[Any, ...] = ()) -> Any:
            return self.db.execute(sql.replace("%s", "?").replace(" FOR UPDATE", ""), args).fetchone()

        self.db.execute("BEGIN IMMEDIATE")
        try:
            result = await work(q)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return result


class Pg:
    async def open(self, url: str) -> Pg:
        self.conn, self.lock = await psycopg.AsyncConnection.connect(url, autocommit=True), asyncio.Lock()
        for sql in SCHEMA:
            await self.conn.execute(sql.format(serial="BIGSERIAL"))
        return self

    async def run(self, work: Any) -> Any:
        async def q(sql: str, args: tuple[Any, ...] = ()) -> Any:
            cursor = await self.conn.execute(sql, args)
            return await cursor.fetchone() if cursor.description else None

        async with self.lock, self.conn.transaction():  # one connection: one transaction at a time
            return await work(q)


def sign(run_id: str, key: str, attempt: int) -> str:
    return hmac.new(SECRET, f"{run_id}\n{key}\n{attempt}".encode(), hashlib.sha256).hexdigest()[:32]


class Floor:
    def __init__(self, base: str, database: str, webhook: str) -> None:
        self.base, self.database, self.webhook, self.tasks = base, database, webhook, set[asyncio.Task[None]]()

    async def start(self) -> None:
        self.store = await Pg().open(self.database) if self.database.startswith("postgres") else Lite(self.database)
        self.client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256, limit_per_host=64))

    def dispatch(self, run_id: str, key: str, attempt: int, input_json: str) -> None:
        url = f"{self.base}/callback/{run_id}/{key}?attempt={attempt}&sig={sign(run_id, key, attempt)}"
        body = (
            f'{{"runId":"{run_id}","nodeId":"{key}","attempt":{attempt},'
            f'"callbackUrl":"{url}","config":{{}},"input":{input_json}}}'
        )
        task = asyncio.get_running_loop().create_task(self.post(body.encode()))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def post(self, body: bytes) -> None:
        async with self.client.post(self.webhook, data=body, headers={"Content-Type": "application/json"}) as response:
            await response.read()

    async def begin(self, run_input: Any) -> str:
        run_id, input_json = str(uuid.uuid4()), json.dumps(run_input)

        async def work(q: Query) -> None:
            await q("INSERT INTO runs (id, status) VALUES (%s, 'running')", (run_id,))
            for i in range(CHAIN):
                await q(
                    "INSERT INTO nodes (run_id, key, attempt, state, input) VALUES (%s, %s, %s, %s, %s)",
                    (
                        run_id,
                        f"step{i}",
                        int(i == 0),
                        "running" if i == 0 else "pending",
                        input_json if i == 0 else None,
                    ),
                )

        await self.store.run(work)
        self.dispatch(run_id, "step0", 1, input_json)
        return run_id

    async def complete(self, run_id: str, key: str, attempt: int, output_json: str) -> int:
        async def work(q: Query) -> int:
            row = await q("SELECT attempt, state FROM nodes WHERE run_id = %s AND key = %s FOR UPDATE", (run_id, key))
            if row is None or row[0] != attempt or row[1] != "running":
                return 409
            await q(
                "UPDATE nodes SET state = 'completed', output = %s WHERE run_id = %s AND key = %s",
                (output_json, run_id, key),
            )
            await q(
                "INSERT INTO events (run_id, key, status, at) VALUES (%s, %s, 'completed', %s)",
                (run_id, key, time.time()),
            )
            step = int(key.removeprefix("step")) + 1
            if step == CHAIN:
                await q("UPDATE runs SET status = 'completed' WHERE id = %s", (run_id,))
            else:
                await q(
                    "UPDATE nodes SET state = 'running', attempt = 1, input = %s WHERE run_id = %s AND key = %s",
                    (output_json, run_id, f"step{step}"),
                )
            return 200

        status = await self.store.run(work)
        if status == 200 and (step := int(key.removeprefix("step")) + 1) < CHAIN:
            self.dispatch(run_id, f"step{step}", 1, output_json)  # after the commit
        return status

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await self.start()
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
            if len(body) > MAX_BODY:
                return await respond(send, 413, {"detail": "body too large"})
        parts = scope["path"].strip("/").split("/")
        if parts[0] == "callback" and len(parts) == 3 and scope["method"] == "POST":
            query = parse_qs(scope["query_string"].decode())
            try:
                attempt, sig = int(query["attempt"][0]), query["sig"][0]
                payload = json.loads(body)
                status, output = payload["status"], payload["output"]
            except (KeyError, ValueError, TypeError):
                return await respond(send, 400, {"detail": "bad callback"})
            if not hmac.compare_digest(sig, sign(parts[1], parts[2], attempt)):
                return await respond(send, 403, {"detail": "bad signature"})
            if status != "completed":
                return await respond(send, 400, {"detail": "only completions in the floor"})
            code = await self.complete(parts[1], parts[2], attempt, json.dumps(output))
            return await respond(send, code, {"ok": code == 200})
        if parts == ["start"]:
            return await respond(send, 201, {"id": await self.begin(json.loads(body)["input"])})
        if parts == ["done"]:
            row = await self.store.run(lambda q: q("SELECT count(*) FROM runs WHERE status = 'completed'"))
            return await respond(send, 200, {"completed": row[0]})
        await respond(send, 404, {"detail": "not found"})


async def respond(send: Any, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": data})


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(
        Floor(f"http://127.0.0.1:{port}", sys.argv[2], sys.argv[3]),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )
