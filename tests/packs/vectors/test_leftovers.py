"""Chunks left by a crashed write: never shown, never crowding out current chunks, removed later.

A crash (kill -9) between writing a new generation's chunks and committing it leaves those
chunks in Chroma. These tests write such chunks directly into the Chroma collection (what
the crash leaves), on embedded Chroma and on a real `chroma run` server.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from mcp.client import Client
from mcp_types import CallToolResult, TextContent

from agentloom.packs.vectors.store import VectorStore
from tests.conftest import PYTHON, REPO
from tests.packs.vectors.conftest import vectors_host

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def _text(result: CallToolResult) -> str:
    """The reply's first content block, which the server sends as text."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


QUERY = "How do I deploy the service to production?"
GUIDE = "\n\n".join(
    f"Step {i}. "
    + " ".join(f"The deployment guide explains part {i}.{j} of shipping the service safely." for j in range(3))
    for i in range(6)
)
HOUR_NS = 3600 * 10**9


def collection_name() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


def leave_crash_leftovers(store: VectorStore, name: str, doc_id: str, count: int, generation: int) -> list[str]:
    """What a write killed before its commit leaves: `count` chunks of an uncommitted generation,
    here closer to QUERY than any current chunk, so that they would fill any top n."""
    col = store.connection.client().get_collection(name, embedding_function=store._ef())
    query = np.asarray(store.embeddings.embed_documents([QUERY])[0], dtype=np.float32)
    # Distinct vectors (identical ones degrade HNSW on the Chroma server), each a nudge away from QUERY.
    nudges = np.random.default_rng(count).normal(size=(count, query.size)).astype(np.float32)
    vectors = query + 0.02 * nudges / np.linalg.norm(nudges, axis=1, keepdims=True)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [f"{QUERY} ({doc_id} draft {i})" for i in range(count)]
    ids = [f"{doc_id}:{generation}:{i}" for i in range(count)]
    col.add(
        ids=ids,
        embeddings=list(vectors),
        documents=texts,
        metadatas=[
            {"document_id": doc_id, "generation": generation, "chunk_index": i, "section": "ops guide"}
            for i in range(count)
        ],
    )
    return ids


def chunk_ids(store: VectorStore, name: str, doc_id: str) -> set[str]:
    col = store.connection.client().get_collection(name, embedding_function=store._ef())
    return set(col.get(where={"document_id": doc_id}, include=[])["ids"])


def seed(store: VectorStore, name: str) -> dict[str, set[str]]:
    store.create_collection(name)
    guide = store.add_document(name, GUIDE, "guide", {"section": "ops guide"}, chunk_size=32, chunk_overlap=0)
    other = store.add_document(
        name, "Release notes: the service now deploys in one step.", "other", {"section": "ops notes"}
    )
    assert 4 <= guide["chunk_count"] <= 12
    return {"guide": set(guide["chunk_ids"]), "other": set(other["chunk_ids"])}


async def search(client: Client, name: str, **args: Any) -> list[dict[str, Any]]:
    result = await client.call_tool("vector_search", {"collection": name, "query": QUERY, **args})
    assert not result.is_error, _text(result)
    return result.structured_content["results"]


async def test_leftovers_do_not_crowd_current_chunks_out_of_the_top_n(
    tmp_path: Path, store_settings: dict[str, object]
) -> None:
    host = vectors_host(tmp_path, **store_settings)
    store = host.packs["vectors"].state.store
    name = collection_name()
    current = seed(store, name)
    now = time.time_ns()
    leave_crash_leftovers(store, name, "guide", 150, now)  # an update of "guide" killed before its commit
    leave_crash_leftovers(store, name, "other", 60, now + 1)
    leave_crash_leftovers(store, name, "ghost", 40, now + 2)  # a first add killed before its commit
    everything = current["guide"] | current["other"]
    async with Client(host.server) as client:
        found = await search(client, name, n=100)
        assert {r["chunk_id"] for r in found} == everything
        assert not [r for r in found if r["text"].startswith(QUERY)]
        # The same through the other ways a search narrows its candidates:
        by_text = await search(client, name, n=100, document_contains="service")
        assert {r["chunk_id"] for r in by_text} == everything
        by_substring = await search(client, name, n=100, filter={"section": {"$contains": "ops"}})
        assert {r["chunk_id"] for r in by_substring} == everything
        by_field = await search(client, name, n=100, filter={"section": {"$in": ["ops guide", "ops notes"]}})
        assert {r["chunk_id"] for r in by_field} == everything
        hybrid = await search(client, name, n=100, hybrid=True)
        assert {r["chunk_id"] for r in hybrid} == everything
        one_each = await search(client, name, n=5, one_per_document=True)
        assert sorted(r["document_id"] for r in one_each) == ["guide", "other"]
        small = await search(client, name, n=3)
        assert len(small) == 3 and {r["chunk_id"] for r in small} <= everything


async def test_the_next_write_of_a_document_removes_its_leftovers(
    tmp_path: Path, store_settings: dict[str, object]
) -> None:
    host = vectors_host(tmp_path, **store_settings)
    store = host.packs["vectors"].state.store
    name = collection_name()
    current = seed(store, name)
    leave_crash_leftovers(store, name, "fresh", 5, time.time_ns())  # its first add was killed
    leave_crash_leftovers(store, name, "guide", 5, time.time_ns())  # an update was killed
    added = store.add_document(name, "A fresh document about rollbacks.", "fresh")
    assert chunk_ids(store, name, "fresh") == set(added["chunk_ids"])
    updated = store.add_document(name, "The guide, rewritten.", "guide")
    assert chunk_ids(store, name, "guide") == set(updated["chunk_ids"])
    assert chunk_ids(store, name, "other") == current["other"]


async def test_a_restart_removes_leftovers_no_running_write_can_own(
    tmp_path: Path, store_settings: dict[str, object]
) -> None:
    host = vectors_host(tmp_path, **store_settings)
    store = host.packs["vectors"].state.store
    name = collection_name()
    current = seed(store, name)
    old = leave_crash_leftovers(store, name, "guide", 30, time.time_ns() - 2 * HOUR_NS)  # crashed two hours ago
    young = leave_crash_leftovers(store, name, "other", 30, time.time_ns())  # crashed (or still running) just now

    restarted = vectors_host(tmp_path, **store_settings)  # a new server on the same store
    new_store = restarted.packs["vectors"].state.store
    async with Client(restarted.server) as client:
        assert {r["chunk_id"] for r in await search(client, name, n=100)} == current["guide"] | current["other"]
    assert chunk_ids(new_store, name, "guide") == current["guide"]
    if store_settings["mode"] == "embedded":
        # One writer: whatever the previous process left is over.
        assert chunk_ids(new_store, name, "other") == current["other"]
    else:
        # Another server may be in the middle of that write: its chunks stay until they are stale.
        assert chunk_ids(new_store, name, "other") == current["other"] | set(young)
    assert not set(old) & chunk_ids(new_store, name, "guide")
    # Listing and health only look; they never remove anything.
    listed = {c["name"]: c for c in restarted.packs["vectors"].state.store.list_collections()}
    assert listed[name]["document_count"] == 2


KILLED_UPDATE = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    from chromadb.api.models.Collection import Collection
    from tests.packs.vectors.conftest import vectors_host

    tmp, name, settings, first, second = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
    store = vectors_host(Path(tmp), **settings).packs["vectors"].state.store
    store.create_collection(name)
    added = store.add_document(name, first, "guide", chunk_size=32, chunk_overlap=0)
    print(json.dumps(added["chunk_ids"]), flush=True)
    real_add = Collection.add

    def add_then_die(self, *args, **kwargs):  # the new chunks are written; the commit never happens
        real_add(self, *args, **kwargs)
        if self.name == name:
            os.kill(os.getpid(), signal.SIGKILL)

    Collection.add = add_then_die
    store.add_document(name, second, "guide", chunk_size=32, chunk_overlap=0)
    print("not killed", flush=True)
""")


async def test_kill_9_during_an_update(tmp_path: Path, store_settings: dict[str, object]) -> None:
    """A real kill -9 after the new chunks are written, before the commit; then a new server."""
    name = collection_name()
    second = "\n\n".join(
        f"Section {i}. Kubernetes rollout {i} uses blue green deployment with canaries." * 3 for i in range(8)
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env["PYTHONPATH"] = str(REPO)
    with anyio.fail_after(180):
        proc = await anyio.run_process(
            [PYTHON, "-c", KILLED_UPDATE, str(tmp_path), name, json.dumps(store_settings), GUIDE, second],
            env=env,
            check=False,
        )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    committed = set(json.loads(proc.stdout.decode().splitlines()[0]))

    host = vectors_host(tmp_path, **store_settings)
    store = host.packs["vectors"].state.store
    async with Client(host.server) as client:
        # The query matches the uncommitted version best: its chunks would fill a small top n.
        found = await client.call_tool(
            "vector_search", {"collection": name, "query": "blue green canary rollout", "n": 5}
        )
    results = found.structured_content["results"]
    assert len(results) == 5 and {r["chunk_id"] for r in results} <= committed
    if store_settings["mode"] == "embedded":
        assert chunk_ids(store, name, "guide") == committed  # removed at the first use after the start
    rewritten = store.add_document(name, "The guide, rewritten.", "guide")
    assert chunk_ids(store, name, "guide") == set(rewritten["chunk_ids"])
