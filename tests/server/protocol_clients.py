"""Clients and a test pack for the protocol tests: a real ``serve --http`` process, SSE bodies, a chatty pack."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import PYTHON, free_port
from tests.server.clients import RawStdio, serve_args


class RawStdioLogged(RawStdio):
    """:class:`RawStdio` whose stderr goes to a file: a chatty server can fill a pipe nobody reads."""

    def __init__(self, env: dict[str, str], log: Path, *extra: str) -> None:
        self.log = log
        self._errlog = log.open("w")
        self.proc = subprocess.Popen(
            [PYTHON, *serve_args(*extra)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errlog,
            env=env,
            text=True,
        )

    def stderr(self) -> str:
        self.close()
        self._errlog.close()
        return self.log.read_text()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
STREAMABLE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@contextmanager
def http_server(env: dict[str, str], *extra: str) -> Iterator[str]:
    """``python -m agentloom serve --http`` on a free port; yields the ``/mcp`` URL. stdout must stay empty."""
    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, *serve_args("--http", "--port", str(port), *extra)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("HTTP server did not start within 60 s") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert out == b"", f"nothing may be printed to stdout, got {out[:200]!r}"


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body (``data:`` lines; priming events without data are skipped)."""
    messages: list[dict[str, Any]] = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].strip() for line in event.split("\n") if line.startswith("data:"))
        if data:
            messages.append(json.loads(data))
    return messages


def replies(response: Any) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an httpx response, JSON or SSE."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return sse_messages(response.text)
    return [response.json()]


def exchange(
    raw: RawStdio, request_id: int, method: str, params: dict[str, Any] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Send a request; return the notifications that came before its answer, and the answer."""
    raw.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
    before: list[dict[str, Any]] = []
    while True:
        message = raw.receive()
        if message.get("id") == request_id and "method" not in message:
            return before, message
        before.append(message)


def receive_until(raw: RawStdio, predicate: Any) -> list[dict[str, Any]]:
    """Messages read until one matches ``predicate`` (included)."""
    seen: list[dict[str, Any]] = []
    while True:
        message = raw.receive()
        seen.append(message)
        if predicate(message):
            return seen


CHATTY_LOGGER = "agentloom.packs.chatty"


def log_lines(messages: list[dict[str, Any]], logger: str = CHATTY_LOGGER) -> list[tuple[str, str]]:
    """``(level, data)`` of the ``notifications/message`` among ``messages`` from ``logger``.

    Other agentloom loggers may speak meanwhile (the embedding model preparing in the background).
    """
    return [
        (m["params"]["level"], m["params"]["data"])
        for m in messages
        if m.get("method") == "notifications/message" and m["params"].get("logger") == logger
    ]


CHATTY_MODULE = '''
import logging
import threading
import time

from agentloom.server.packs import Pack

log = logging.getLogger("agentloom.packs.chatty")  # the agentloom namespace: relayed to clients that ask

pack = Pack("chatty", "Logs at every level")


@pack.tool(read_only=True)
def chatty_log(text: str) -> str:
    """Log `text` at debug, info, warning and error (from a worker thread, as sync tools run)."""
    log.debug("debug: %s", text)
    log.info("info: %s", text)
    log.warning("warning: %s", text)
    log.error("error: %s", text)
    return "logged " + text


@pack.tool(read_only=True)
async def chatty_log_async(text: str) -> str:
    """Log `text` at warning from the event loop itself."""
    log.warning("async warning: %s", text)
    return "logged " + text


@pack.tool(read_only=True)
def chatty_later(text: str, delay: float = 0.3) -> str:
    """Log `text` at warning from a plain thread after `delay` seconds: outside any request."""

    def later() -> None:
        time.sleep(delay)
        log.warning("background: %s", text)

    threading.Thread(target=later, daemon=True).start()
    return "scheduled"


@pack.tool(read_only=True)
def chatty_flood(count: int) -> int:
    """Log `count` warnings as fast as possible."""
    for i in range(count):
        log.warning("flood %d", i)
    return count


class Loud:
    """A log argument that logs again while it is being formatted."""

    def __str__(self) -> str:
        log.warning("logged while formatting a log line")
        return "loud object"


@pack.tool(read_only=True)
def chatty_nested() -> str:
    """Log a record whose formatting logs another record."""
    log.warning("nested: %s", Loud())
    return "nested done"
'''


def install_chatty(site: Path) -> Path:
    """The ``chatty`` pack, found through the ``agentloom.packs`` entry points of a ``.dist-info`` folder."""
    (site / "agentloom_chatty").mkdir(parents=True, exist_ok=True)
    (site / "agentloom_chatty" / "__init__.py").write_text(CHATTY_MODULE)
    dist = site / "agentloom_chatty-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: agentloom-chatty\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[agentloom.packs]\nchatty = agentloom_chatty:pack\n")
    return site
