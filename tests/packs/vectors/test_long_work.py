"""Large documents through the real server process: progress, cancellation, a client that leaves,
the size limit and memory (issue 36). Each test speaks to `agentloom serve` as a client would."""

from __future__ import annotations

import random
import socket
import subprocess
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from agentloom.server.stdio import EXIT_AFTER
from tests.conftest import PYTHON, free_port
from tests.embeddings.conftest import ServerState, http_server  # noqa: F401 - a fixture
from tests.packs.vectors.conftest import vectors_host
from tests.server.clients import RawStdio, call, error, serve_args, stdio_client_session

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

WORDS = (
    "river stone light quiet engine harbor winter signal garden copper memory thread paper "
    "lantern window orbit meadow silver canyon letter market"
).split()


def book(size: int, seed: int = 7) -> str:
    """At most ``size`` characters of paragraphs of sentences, like a long plain-text book."""
    rng = random.Random(seed)
    paragraphs: list[str] = []
    total = 0
    while total < size:
        sentences = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
            for _ in range(rng.randint(3, 8))
        ]
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        total += len(paragraph) + 2
    return "\n\n".join(paragraphs)[:size].rsplit(" ", 1)[0]


async def _state(client: Any, collection: str) -> tuple[dict[str, Any], list[str]]:
    listed = await call(client, "vector_list_collections")
    documents = await call(client, "vector_list_documents", collection=collection)
    return listed, [d["document_id"] for d in documents["documents"]]


async def test_a_5_mb_document_reports_progress_and_a_cancel_leaves_the_collection_as_it_was(
    server_env: dict[str, str],
    tmp_path: Path,
) -> None:
    text = book(5_000_000)
    log = tmp_path / "server.log"
    with log.open("w") as errlog:
        async with stdio_client_session(server_env, "--packs", "vectors", errlog=errlog) as client:
            await call(client, "vector_create_collection", name="books")
            await call(
                client,
                "vector_add_document",
                collection="books",
                document_id="keep",
                text="A short note about the river and its stones.",
            )
            before = await _state(client, "books")
            stamps: list[tuple[float, float | None, str | None]] = []
            progressing = anyio.Event()
            finished = False

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                stamps.append((progress, total, message))
                if len(stamps) >= 2:
                    progressing.set()

            async def add() -> None:
                nonlocal finished
                await client.call_tool(
                    "vector_add_document",
                    {"collection": "books", "document_id": "book", "text": text},
                    progress_callback=on_progress,
                )
                finished = True

            # Cancelled once the add has reported progress twice, however long that takes.
            async with anyio.create_task_group() as tg:
                tg.start_soon(add)
                with anyio.fail_after(120):
                    await progressing.wait()
                tg.cancel_scope.cancel()
            assert not finished, "5 MB were added before two progress notifications: the test needs a larger text"
            reported = len(stamps)
            after = await _state(client, "books")  # the next call is answered, even while the add rolls back
            await _wait_for(log, "vector_add_document into 'books': stopped")
            stopped_log = log.read_text()
            finally_ = await _state(client, "books")
            search = await call(client, "vector_search", collection="books", query="copper lantern orbit", n=5)
    assert after == before and finally_ == before  # nothing of the cancelled add, even while it rolls back
    assert {hit["document_id"] for hit in search["results"]} == {"keep"}
    assert "cancelled by the client" in stopped_log and ": stopped" in stopped_log
    assert reported >= 2  # progress came while the add ran (how often: BENCHMARKS.md, "Long work")
    values = [s[0] for s in stamps]
    assert values == sorted(values) and len(set(values)) == len(values)  # MCP: progress always increases
    assert all(s[2] for s in stamps)  # every notification says what is happening


def _raw_add(raw: RawStdio, id_: int, collection: str, text: str, document_id: str) -> None:
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": id_,
            "method": "tools/call",
            "params": {
                "name": "vector_add_document",
                "_meta": {"progressToken": id_},
                "arguments": {"collection": collection, "text": text, "document_id": document_id},
            },
        }
    )


def _answer(raw: RawStdio, id_: int) -> dict[str, Any]:
    while True:
        message = raw.receive()
        if message.get("id") == id_:
            return message


async def test_closing_stdin_during_a_large_add_ends_the_server_and_keeps_the_collection(
    server_env: dict[str, str],
) -> None:
    raw = RawStdio(server_env, "--packs", "vectors")
    raw.initialize()
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "vector_create_collection", "arguments": {"name": "books"}},
        }
    )
    assert "error" not in _answer(raw, 2)
    _raw_add(raw, 3, "books", "A short note about the river and its stones.", "keep")
    assert not _answer(raw, 3)["result"]["isError"]
    _raw_add(raw, 4, "books", book(5_000_000), "book")
    for _ in range(2):  # the add is under way: it has reported progress twice
        assert raw.receive()["method"] == "notifications/progress"
    assert raw.proc.stdin is not None
    raw.proc.stdin.close()
    # The server ends itself within EXIT_AFTER of its stdin closing, whatever still runs; the deadline
    # here gives a loaded machine ten times that (the time itself: BENCHMARKS.md, "Long work").
    try:
        raw.proc.wait(timeout=10 * EXIT_AFTER)
    except subprocess.TimeoutExpired:
        raw.proc.kill()
        pytest.fail(f"the server was still running {10 * EXIT_AFTER:g} s after its stdin closed")
    assert raw.proc.stderr is not None
    stderr = raw.proc.stderr.read()
    assert "stdin closed" in stderr
    async with stdio_client_session(server_env, "--packs", "vectors") as client:
        listed, documents = await _state(client, "books")
    assert documents == ["keep"]
    assert [(c["name"], c["document_count"], c["chunk_count"]) for c in listed["collections"]] == [("books", 1, 1)]


async def test_a_text_over_the_limit_is_refused_before_any_work_naming_the_size_the_limit_and_the_ways_out(
    server_env: dict[str, str],
) -> None:
    async with stdio_client_session(
        {**server_env, "AGENTLOOM_VECTORS__MAX_TEXT_MB": "1"}, "--packs", "vectors"
    ) as client:
        await call(client, "vector_create_collection", name="books")
        message = await error(client, "vector_add_document", collection="books", text="é" * 600_000)
        _, refused = await _state(client, "books")  # nothing of it was stored
        several = await error(
            client,
            "vector_add_documents",
            collection="books",
            documents=[{"text": "x" * 600_000}, {"text": "y" * 600_000}],
        )
        fits = await call(client, "vector_add_document", collection="books", text="river stone " * 2_000)
    assert refused == []
    assert message.startswith("text is 1.2 MB of UTF-8, over this server's limit of 1 MB per call.")
    assert "vector_add_files" in message and "AGENTLOOM_VECTORS__MAX_TEXT_MB" in message
    assert "max_text_mb" in message and "[pack_settings.vectors]" in message
    assert "documents (all texts together) is at least 1.2 MB" in several
    assert fits["chunk_count"] > 0
    async with stdio_client_session(server_env, "--packs", "vectors") as client:  # the default limit
        message = await error(client, "vector_add_document", collection="books", text="river " * 3_500_000)
    assert message.startswith("text is at least 21.0 MB of UTF-8, over this server's limit of 20 MB per call.")


def test_a_large_document_is_embedded_and_stored_a_window_at_a_time(
    tmp_path: Path,
    http_server: tuple[str, ServerState],
) -> None:
    """What agentloom's own code holds while it adds a 5 MB document peaks well under twice the text
    (issue 36: "embed and store in batches, not all at once"; all at once, its chunks, vectors and rows
    alone take about 4x). Python's allocations, by tracemalloc; the server's RSS also grows by what
    Chroma keeps natively per chunk stored, which BENCHMARKS.md reports. The model is served on
    loopback in the OpenAI wire format: the local model would make this test minutes long."""
    url, state = http_server
    state.dims, state.record = 64, False
    host = vectors_host(tmp_path, embedding_model="loop")
    registry = host.embeddings.registry
    registry.upsert_provider("loop", "openai", base_url=f"{url}/v1", api_key=state.api_key)
    registry.add_model("loop", "loop", dimensions=64)
    store = host.packs["vectors"].state.store
    store.create_collection("books")
    target = store.collection("books")
    key = store.collection_model(target)
    store.write(target, key, [store.prepare(key, book(200_000, seed=3), "warm")])
    text = book(5_000_000)
    tracemalloc.start()
    try:
        written = store.write(target, key, [store.prepare(key, text, "book")])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert written[0]["chunk_count"] > 9_000
    assert peak <= 2 * len(text.encode()), f"Python allocations peaked at {peak / 1e6:.1f} MB for a 5 MB text"
    found = store.documents("books", ["book"])["book"]
    assert found.chunk_count == written[0]["chunk_count"]


@pytest.fixture
def http_server_url(server_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`agentloom serve --http` with the vectors pack; its log file."""
    port = free_port()
    log = tmp_path / "http-server.log"
    with log.open("w") as errlog:
        proc = subprocess.Popen(
            [PYTHON, *serve_args("--http", "--port", str(port), "--packs", "vectors")],
            env=server_env,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start within 30 s"
                time.sleep(0.1)
        try:
            yield f"http://127.0.0.1:{port}/mcp", log
        finally:
            proc.terminate()
            proc.wait(timeout=10)


async def _wait_for(log: Path, text: str, seconds: float = 120) -> None:
    """Until ``text`` is in the server's log; the deadline is for a hang (how soon: BENCHMARKS.md, "Long work"
    and "Long work over HTTP")."""
    deadline = time.monotonic() + seconds
    while text not in (logged := await anyio.Path(log).read_text()):
        assert time.monotonic() < deadline, f"{text!r} not logged within {seconds} s:\n{logged}"
        await anyio.sleep(0.05)


@pytest.mark.parametrize("how", ["cancel", "session end"])
async def test_over_http_a_cancel_or_the_end_of_the_session_stops_a_large_add(
    http_server_url: tuple[str, Path],
    how: str,
) -> None:
    url, log = http_server_url
    text = book(5_000_000)
    async with Client(url) as client:
        await call(client, "vector_create_collection", name="books")
        await call(client, "vector_add_document", collection="books", document_id="keep", text="River stones.")
        before = await _state(client, "books")
    messages: list[str | None] = []
    progressing = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)
        progressing.set()

    async with Client(url) as client:
        async with anyio.create_task_group() as tg:

            async def add() -> None:
                await client.call_tool(
                    "vector_add_document",
                    {"collection": "books", "document_id": "book", "text": text},
                    progress_callback=on_progress,
                )

            tg.start_soon(add)
            with anyio.fail_after(120):
                await progressing.wait()  # the add is under way
            tg.cancel_scope.cancel()  # the client gives up the call: MCP's notifications/cancelled
        if how == "cancel":
            await _wait_for(log, "vector_add_document into 'books': stopped")
            assert await _state(client, "books") == before
    if how == "session end":
        await _wait_for(log, "vector_add_document into 'books': stopped")
    assert messages and all(messages)
    async with Client(url) as client:
        assert await _state(client, "books") == before
