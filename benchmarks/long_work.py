"""Long work through a real MCP client (issue 36): a 5 MB document against the same text as 100 documents,
progress gaps, cancellation, a client that closes stdin, the size limit, and memory on a 20 MB text.

Over streamable HTTP (`python -m benchmarks long-work-http`, also run by long-work; seconds
where the whole suite takes about ten minutes): how soon a large add stops once the client cancels the call,
or cancels it and ends its session."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from benchmarks.report import ROOT, write_section

SCIFACT = ROOT.parent / "shared" / "benchmarks" / "scifact" / "corpus.jsonl"
PYTHON = sys.executable


def scifact_text(size: int) -> str:
    """Real prose: SciFact abstracts, one after another (the corpus again once it ends: it holds
    about 8 MB), up to ``size`` characters."""
    with SCIFACT.open() as corpus:
        abstracts = [f"{r.get('title', '')}\n\n{r['text']}".strip() for r in map(json.loads, corpus)]
    parts: list[str] = []
    total = 0
    while total < size:
        part = abstracts[len(parts) % len(abstracts)]
        parts.append(part)
        total += len(part) + 2
    return "\n\n".join(parts)[:size]


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env["AGENTLOOM_DATA_DIR"] = str(data)
    return env


def _client(env: dict[str, str], errlog: Any) -> Client:
    params = StdioServerParameters(command=PYTHON, args=["-m", "agentloom", "serve", "--packs", "vectors"], env=env)
    return Client(stdio_client(params, errlog=errlog))


async def _ingest(env: dict[str, str], text: str, errlog: Any) -> dict[str, float]:
    """The whole text as one document, then as 100 documents, in one server (same model, same run)."""
    async with _client(env, errlog) as client:
        await client.call_tool("vector_create_collection", {"name": "one"})
        await client.call_tool("vector_create_collection", {"name": "many"})
        await client.call_tool("vector_add_document", {"collection": "one", "text": "warm-up", "document_id": "w"})
        stamps: list[float] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            stamps.append(time.monotonic())

        started = time.monotonic()
        one = (
            await client.call_tool(
                "vector_add_document",
                {"collection": "one", "text": text, "document_id": "big"},
                progress_callback=on_progress,
            )
        ).structured_content
        one_seconds = time.monotonic() - started
        gaps = [b - a for a, b in zip([started, *stamps], [*stamps, time.monotonic()])]
        step = len(text) // 100
        documents = [
            {"text": text[i * step : (i + 1) * step if i < 99 else len(text)], "document_id": f"part-{i}"}
            for i in range(100)
        ]
        started = time.monotonic()
        many = (
            await client.call_tool("vector_add_documents", {"collection": "many", "documents": documents})
        ).structured_content
        many_seconds = time.monotonic() - started
    assert one is not None and many is not None
    return {
        "one_chunks": one["chunk_count"],
        "one_seconds": one_seconds,
        "many_chunks": many["total_chunks"],
        "many_seconds": many_seconds,
        "max_gap": max(gaps),
        "notifications": len(stamps),
    }


async def _cancel(env: dict[str, str], text: str, log: Path) -> dict[str, float]:
    with log.open("w") as errlog:
        async with _client(env, errlog) as client:
            await client.call_tool("vector_create_collection", {"name": "cancel"})
            await client.call_tool("vector_add_document", {"collection": "cancel", "text": "kept", "document_id": "k"})
            before = (await client.call_tool("vector_list_collections", {})).structured_content
            with anyio.move_on_after(3.0):
                await client.call_tool(
                    "vector_add_document", {"collection": "cancel", "text": text, "document_id": "b"}
                )
            cancelled = time.monotonic()
            after = (await client.call_tool("vector_list_collections", {})).structured_content
            answered = time.monotonic() - cancelled
            # polls the server's log file, which has no event to wait on
            while "'cancel': stopped" not in log.read_text():  # noqa: ASYNC110, ASYNC240
                await anyio.sleep(0.02)
            stopped = time.monotonic() - cancelled
    assert after == before, (before, after)
    return {"answered": answered, "stopped": stopped}


def _raw(env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [PYTHON, "-m", "agentloom", "serve", "--packs", "vectors"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    _send(
        proc,
        1,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
    )
    assert proc.stdin is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    _answer(proc, 1)
    return proc


def _send(proc: subprocess.Popen[bytes], id_: int, method: str, params: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode() + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], id_: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        message = json.loads(proc.stdout.readline())
        if message.get("id") == id_:
            return message


def _tool(proc: subprocess.Popen[bytes], id_: int, tool: str, **arguments: Any) -> dict[str, Any]:
    _send(proc, id_, "tools/call", {"name": tool, "arguments": arguments})
    return _answer(proc, id_)["result"]


def _stdin_close(env: dict[str, str], text: str) -> float:
    proc = _raw(env)
    _tool(proc, 2, "vector_create_collection", name="closing")
    _send(proc, 3, "tools/call", {"name": "vector_add_document", "arguments": {"collection": "closing", "text": text}})
    time.sleep(3.0)
    assert proc.stdin is not None
    proc.stdin.close()
    closed = time.monotonic()
    proc.wait(timeout=30)
    return time.monotonic() - closed


def _refusal(env: dict[str, str]) -> float:
    proc = _raw(env)
    _tool(proc, 2, "vector_create_collection", name="limit")
    started = time.monotonic()
    reply = _tool(proc, 3, "vector_add_document", collection="limit", text="river " * 3_500_000)
    took = time.monotonic() - started
    assert reply["isError"] and "limit of 20 MB" in reply["content"][0]["text"], reply
    proc.stdin.close()  # type: ignore[union-attr]
    proc.wait(timeout=30)
    return took


class _Embeddings(BaseHTTPRequestHandler):
    """A loopback model in the OpenAI embeddings wire format: memory is measured, not the model."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": [b / 255 + 0.01 for b in hashlib.sha256(t.encode()).digest()] * 2,
            }
            for i, t in enumerate(texts)
        ]
        payload = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _peak_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def _memory(base: Path) -> dict[str, float]:
    """Peak RSS of the server around a 20 MB add (fixed costs measured apart), and the Python allocations of
    the add itself (tracemalloc, in process); 64-dimensional vectors from a loopback model."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    data = base / "memory"
    env = {**_env(data), "LOOP_KEY": "k"}
    subprocess.run(
        [
            PYTHON,
            "-m",
            "agentloom",
            "models",
            "add",
            "loop",
            "--provider",
            "loop",
            "--kind",
            "openai",
            "--base-url",
            url,
            "--api-key-env",
            "LOOP_KEY",
            "--dimensions",
            "64",
            "--default",
            "--data-dir",
            str(data),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    large, small = scifact_text(19_900_000), scifact_text(5_000_000)[::-1]  # under the 20 MB limit
    proc = _raw(env)
    figures: dict[str, float] = {"start": _peak_kb(proc.pid)}
    _tool(proc, 2, "vector_create_collection", name="memory")
    _tool(proc, 3, "vector_add_document", collection="nowhere", text=large)
    figures["received"] = _peak_kb(proc.pid)
    assert not _tool(proc, 4, "vector_add_document", collection="memory", text=small)["isError"]
    figures["small"] = _peak_kb(proc.pid)
    assert not _tool(proc, 5, "vector_add_document", collection="memory", text=large)["isError"]
    figures["large"] = _peak_kb(proc.pid)
    proc.stdin.close()  # type: ignore[union-attr]
    proc.wait(timeout=60)

    import logging

    from agentloom.core.settings import Settings
    from agentloom.server.host import Host, discover_packs

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per batch otherwise

    os.environ["LOOP_KEY"] = "k"
    host = Host(Settings(data_dir=data, packs=["vectors"]), [ep for ep in discover_packs() if ep.name == "vectors"])
    store = host.packs["vectors"].state.store
    store.create_collection("traced")
    target = store.collection("traced")
    key = store.collection_model(target)
    tracemalloc.start()
    store.write(target, key, [store.prepare(key, large, "large")])
    figures["python_peak"] = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    server.shutdown()
    figures["text_mb"] = len(large.encode()) / 1e6
    figures["small_mb"] = len(small.encode()) / 1e6
    return figures


def run() -> str:
    text = scifact_text(5_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        errlog = (base / "ingest.log").open("w")
        ingest = anyio.run(_ingest, _env(base / "ingest"), text, errlog)
        print(f"ingest: {ingest}", file=sys.stderr)
        cancel = anyio.run(_cancel, _env(base / "cancel"), text, base / "cancel.log")
        print(f"cancel: {cancel}", file=sys.stderr)
        closing = _stdin_close(_env(base / "closing"), text)
        refusal = _refusal(_env(base / "limit"))
        print(f"stdin closed: {closing:.2f} s, refusal: {refusal:.2f} s", file=sys.stderr)
        memory = _memory(base)
    one_rate = ingest["one_chunks"] / ingest["one_seconds"]
    many_rate = ingest["many_chunks"] / ingest["many_seconds"]
    mb = 1024 / 1e6  # kB of /proc to MB
    return f"""
Through the MCP Python SDK client over stdio against `agentloom serve --packs vectors` (local
all-MiniLM-L6-v2), on {len(text) / 1e6:.1f} MB of SciFact abstracts.

| what | figure | goal |
|---|---|---|
| one {len(text) / 1e6:.1f} MB document (`vector_add_document`) | {ingest["one_chunks"]:,.0f} chunks in {ingest["one_seconds"]:.1f} s: **{one_rate:.1f} chunks/s** | |
| the same text as 100 documents (`vector_add_documents`, one call) | {ingest["many_chunks"]:,.0f} chunks in {ingest["many_seconds"]:.1f} s: {many_rate:.1f} chunks/s | |
| one document vs 100 documents | **{one_rate / many_rate:.2f}x** | >= 0.8x |
| longest wait for a progress notification (progressToken sent) | {ingest["max_gap"]:.2f} s ({ingest["notifications"]:.0f} notifications) | <= 2 s |
| cancel after 3 s: next call answered, collection as before | {cancel["answered"]:.2f} s | <= 1 s |
| cancel after 3 s: the add stopped and undone (server log) | {cancel["stopped"]:.2f} s | <= 1 s |
| stdin closed 3 s into the add: server process gone | {closing:.2f} s | <= 2 s |
| a 21 MB text refused (default limit 20 MB) | {refusal:.2f} s | <= 1 s |

Memory on a {memory["text_mb"]:.0f} MB text (a loopback model in the OpenAI wire format, 64 dimensions, so that
the run takes seconds; peak RSS of the server process, VmHWM):

| what | peak RSS grew by |
|---|---|
| receiving the {memory["text_mb"]:.0f} MB message (a call refused at once: the MCP SDK's transport, before any tool runs) | {(memory["received"] - memory["start"]) * mb:.0f} MB |
| then adding a {memory["small_mb"]:.0f} MB text (Chroma's first large write included) | {(memory["small"] - memory["received"]) * mb:.0f} MB |
| then adding the {memory["text_mb"]:.0f} MB text | {(memory["large"] - memory["small"]) * mb:.0f} MB |
| agentloom's own Python allocations while adding the {memory["text_mb"]:.0f} MB text (tracemalloc peak, in process) | {memory["python_peak"]:.1f} MB |

The add itself holds a section of the text (128 K characters) and a window of 256 chunks at a time; what
grows with the text beyond that is Chroma's (its index and SQLite pages, native memory) and the SDK's
copies of the request.
"""


HTTP_TRIES = int(os.environ.get("LONG_WORK_HTTP_TRIES", 5))


def _http_server(env: dict[str, str], errlog: Any) -> tuple[subprocess.Popen[bytes], str]:
    """`agentloom serve --http --packs vectors` on a free port, once it accepts connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [PYTHON, "-m", "agentloom", "serve", "--http", "--port", str(port), "--packs", "vectors"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errlog)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the HTTP server did not start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)


async def _http_stop(url: str, log: Path, text: str, collection: str, how: str) -> float:
    """Seconds from the client giving up a large add (MCP's notifications/cancelled; for "session end"
    the client then leaves the session) to the server logging that the add stopped and was undone."""
    async with Client(url) as client:
        await client.call_tool("vector_create_collection", {"name": collection})
        progressing = anyio.Event()

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progressing.set()

        async with anyio.create_task_group() as tg:

            async def add() -> None:
                await client.call_tool(
                    "vector_add_document",
                    {"collection": collection, "text": text, "document_id": "b"},
                    progress_callback=on_progress,
                )

            tg.start_soon(add)
            with anyio.fail_after(300):
                await progressing.wait()  # the add is under way
            tg.cancel_scope.cancel()
            cancelled = time.monotonic()
        if how == "cancel":  # still in the session
            return await _stopped(log, collection, cancelled)
    return await _stopped(log, collection, cancelled)


async def _stopped(log: Path, collection: str, since: float) -> float:
    # polls the server's log file, which has no event to wait on
    while f"into '{collection}': stopped" not in log.read_text():  # noqa: ASYNC110, ASYNC240
        await anyio.sleep(0.02)
    return time.monotonic() - since


def http_run() -> str:
    load = os.getloadavg()[0]
    text = scifact_text(5_000_000)
    stops: dict[str, list[float]] = {"cancel": [], "session end": []}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "http.log"
        with log.open("w") as errlog:
            proc, url = _http_server(_env(Path(tmp) / "data"), errlog)
            try:
                for i in range(HTTP_TRIES):
                    for how, taken in stops.items():  # in turns
                        taken.append(anyio.run(_http_stop, url, log, text, f"{how.replace(' ', '-')}-{i}", how))
                        print(f"over HTTP, {how}: stopped in {taken[-1]:.2f} s", file=sys.stderr)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    rows = "\n".join(
        f"| {how} | {statistics.median(taken):.2f} s | {max(taken):.2f} s | <= 1 s |" for how, taken in stops.items()
    )
    return f"""
Through the MCP Python SDK client over streamable HTTP against `agentloom serve --http --packs vectors`
(local all-MiniLM-L6-v2): a {len(text) / 1e6:.1f} MB document of SciFact abstracts is added and the client
gives the call up once the add has reported progress (MCP's `notifications/cancelled`); "session end":
the client then leaves its session. The time from the client giving up to the server's log saying the add
stopped and was undone (`... into '<collection>': stopped`), {HTTP_TRIES} times each, in turns, one server.
Load average (1 min) {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores.

| the client | median | worst | goal |
|---|---|---|---|
{rows}
"""


def http_main() -> None:
    if not SCIFACT.exists():
        sys.exit(f"long-work-http: {SCIFACT} not found (the shared SciFact corpus)")
    write_section("Long work over HTTP", http_run(), "python -m benchmarks long-work-http")


def main() -> None:
    if not SCIFACT.exists():
        sys.exit(f"long-work: {SCIFACT} not found (the shared SciFact corpus)")
    write_section("Long work (issue 36)", run(), "python -m benchmarks long-work")
    http_main()
