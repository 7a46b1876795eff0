"""Store guarantees that need a look behind the tools: generations, models, connection failures."""

from __future__ import annotations

import uuid
from pathlib import Path

from mcp.client import Client

from agentloom.core.breakers import State
from tests.conftest import free_port
from tests.packs.vectors.conftest import vectors_host


def collection_name() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


async def test_leftover_chunks_of_an_interrupted_write_are_invisible(tmp_path: Path) -> None:
    host = vectors_host(tmp_path)
    store = host.packs["vectors"].state.store
    name = collection_name()
    store.create_collection(name)
    store.add_document(name, "The capital of France is Paris.", "geo")
    # What a crash between writing new chunks and committing the manifest leaves behind:
    col = store.collection(name)
    vector = store.embeddings.embed_documents(["The capital of France is Lyon."])
    leftover = store.document(name, "geo").generation + 1  # the id the next write would use if it counted up
    col.add(ids=[f"geo:{leftover}:0"], embeddings=vector, documents=["The capital of France is Lyon."],
            metadatas=[{"document_id": "geo", "generation": leftover, "chunk_index": 0}])
    async with Client(host.server) as client:
        res = (await client.call_tool("vector_search", {"collection": name, "query": "capital of France Lyon",
                                                         "n": 5})).structured_content
    assert [r["text"] for r in res["results"]] == ["The capital of France is Paris."]
    # The next update supersedes both and cleans up.
    store.add_document(name, "The capital of France is Paris, on the Seine.", "geo")
    assert col.get(include=["documents"])["documents"] == ["The capital of France is Paris, on the Seine."]


async def test_dimension_mismatch_is_refused(tmp_path: Path) -> None:
    host = vectors_host(tmp_path)
    store = host.packs["vectors"].state.store
    client = store.connection.client()
    wide = collection_name()  # built by another tool, claiming our model's key with other dimensions
    client.create_collection(wide, metadata={"embedding_model": "all-MiniLM-L6-v2", "embedding_dimensions": 1536},
                             embedding_function=store._ef())
    unknown = collection_name()
    client.create_collection(unknown, metadata={"embedding_model": "paraphrase-MiniLM", "embedding_dimensions": 384},
                             embedding_function=store._ef())
    async with Client(host.server) as c:
        refused = await c.call_tool("vector_add_document", {"collection": wide, "text": "hello"})
        missing = await c.call_tool("vector_search", {"collection": unknown, "query": "hello"})
    assert refused.is_error and "1536-dimensional" in refused.content[0].text and "384" in refused.content[0].text
    assert missing.is_error and "'paraphrase-MiniLM', which is not configured" in missing.content[0].text


async def test_unreachable_server_gives_a_short_error_and_opens_the_breaker(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    host = vectors_host(tmp_path, mode="remote", host="127.0.0.1", port=port)
    assert host.packs["vectors"]  # configuration is fine: the pack loads, calls fail clearly
    async with Client(host.server) as c:
        messages = [(await c.call_tool("vector_list_collections", {})).content[0].text for _ in range(4)]
    assert f"127.0.0.1:{port} is unreachable" in messages[0]
    assert "Traceback" not in messages[0] and len(messages[0]) < 400
    assert host.breakers.get("chroma").state is State.OPEN
    assert "circuit open" in messages[3]


def test_broken_configuration_disables_only_this_pack(tmp_path: Path) -> None:
    host = vectors_host(tmp_path, mode="cloud", chunk_size=10)
    report = {r.name: r for r in host.reports}["vectors"]
    assert report.status == "failed"
    assert "AGENTLOOM_VECTORS__MODE (mode in [pack_settings.vectors]): Input should be 'embedded' or 'remote'" in report.reason
    assert "AGENTLOOM_VECTORS__CHUNK_SIZE" in report.reason and "pydantic" not in report.reason
    assert "vector_search" not in host.tool_names
