"""Store guarantees that need a look behind the tools: generations, models, connection failures."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from mcp.client import Client
from mcp_types import CallToolResult, TextContent

from agentloom.core.breakers import State
from agentloom.core.errors import AgentloomError
from agentloom.packs.vectors.records import (
    DocumentRecord,
    check_collection_name,
    check_metadata,
    chunk_id,
    manifest_id,
    public_metadata,
    record_of,
)
from tests.conftest import free_port
from tests.packs.vectors.conftest import vectors_host


def _text(result: CallToolResult) -> str:
    """The reply's first content block, which the server sends as text."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


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
    col.add(
        ids=[f"geo:{leftover}:0"],
        embeddings=vector,
        documents=["The capital of France is Lyon."],
        metadatas=[{"document_id": "geo", "generation": leftover, "chunk_index": 0}],
    )
    async with Client(host.server) as client:
        res = (
            await client.call_tool("vector_search", {"collection": name, "query": "capital of France Lyon", "n": 5})
        ).structured_content
    assert [r["text"] for r in res["results"]] == ["The capital of France is Paris."]
    # The next update supersedes both and cleans up.
    store.add_document(name, "The capital of France is Paris, on the Seine.", "geo")
    assert col.get(include=["documents"])["documents"] == ["The capital of France is Paris, on the Seine."]


async def test_dimension_mismatch_is_refused(tmp_path: Path) -> None:
    host = vectors_host(tmp_path)
    store = host.packs["vectors"].state.store
    client = store.connection.client()
    wide = collection_name()  # built by another tool, claiming our model's key with other dimensions
    client.create_collection(
        wide,
        metadata={"embedding_model": "all-MiniLM-L6-v2", "embedding_dimensions": 1536},
        embedding_function=store._ef(),
    )
    unknown = collection_name()
    client.create_collection(
        unknown,
        metadata={"embedding_model": "paraphrase-MiniLM", "embedding_dimensions": 384},
        embedding_function=store._ef(),
    )
    async with Client(host.server) as c:
        refused = await c.call_tool("vector_add_document", {"collection": wide, "text": "hello"})
        missing = await c.call_tool("vector_search", {"collection": unknown, "query": "hello"})
    assert refused.is_error and "1536-dimensional" in _text(refused) and "384" in _text(refused)
    assert missing.is_error and "'paraphrase-MiniLM', which is not configured" in _text(missing)


async def test_unreachable_server_gives_a_short_error_and_opens_the_breaker(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    host = vectors_host(tmp_path, mode="remote", host="127.0.0.1", port=port)
    assert host.packs["vectors"]  # configuration is fine: the pack loads, calls fail clearly
    async with Client(host.server) as c:
        messages = [_text(await c.call_tool("vector_list_collections", {})) for _ in range(4)]
    assert f"127.0.0.1:{port} is unreachable" in messages[0]
    assert "Traceback" not in messages[0] and len(messages[0]) < 400
    assert host.breakers.get("chroma").state is State.OPEN
    assert "circuit open" in messages[3]


def test_broken_configuration_disables_only_this_pack(tmp_path: Path) -> None:
    host = vectors_host(tmp_path, mode="cloud", chunk_size=10)
    report = {r.name: r for r in host.reports}["vectors"]
    assert report.status == "failed" and report.reason is not None
    assert (
        "AGENTLOOM_VECTORS__MODE (mode in [pack_settings.vectors]): Input should be 'embedded' or 'remote'"
        in report.reason
    )
    assert "AGENTLOOM_VECTORS__CHUNK_SIZE" in report.reason and "pydantic" not in report.reason
    assert "vector_search" not in host.tool_names


# -- the id scheme and the checks at the store's edge (records.py), without a server --------


def test_chunk_and_manifest_ids_are_exact_and_unambiguous() -> None:
    assert chunk_id("doc", 7, 0) == "doc:7:0"
    assert chunk_id("a:b", 12, 3) == "a:b:12:3"
    assert manifest_id("notes", "doc") == '["notes", "doc"]'
    # a separator inside a name cannot make two pairs collide
    assert manifest_id("a", "b/c") != manifest_id("a/b", "c")
    assert json.loads(manifest_id('we"ird', "d\u00e9j\u00e0")) == ['we"ird', "d\u00e9j\u00e0"]


def test_record_of_reads_every_field_with_its_type() -> None:
    meta = {
        "collection": "notes",
        "document_id": "doc",
        "generation": "42",
        "chunk_count": "3",
        "created_at": "1700000000",
        "updated_at": 1700000100,
        "embedding_model": "all-MiniLM-L6-v2",
        "metadata_json": '{"topic": "geo", "n": 2}',
    }
    record = record_of(meta)
    assert record == DocumentRecord(
        collection="notes",
        document_id="doc",
        generation=42,
        chunk_count=3,
        created_at=1700000000.0,
        updated_at=1700000100.0,
        embedding_model="all-MiniLM-L6-v2",
        metadata={"topic": "geo", "n": 2},
    )
    assert type(record.generation) is int and type(record.chunk_count) is int
    assert type(record.created_at) is float and type(record.updated_at) is float
    for missing in ({}, {"metadata_json": ""}, {"metadata_json": None}):
        assert record_of({**meta, "metadata_json": None} | missing).metadata == {}
    without = {k: v for k, v in meta.items() if k != "metadata_json"}
    assert record_of(without).metadata == {}


def test_public_metadata_hides_the_generation_and_shows_dates() -> None:
    meta = {
        "document_id": "doc",
        "generation": 1234567890123456789,
        "created_at": 0,
        "updated_at": 1700000000.5,
        "chunk_index": 2,
        "topic": "geo",
    }
    assert public_metadata(meta) == {
        "document_id": "doc",
        "created_at": "1970-01-01T00:00:00.000Z",
        "updated_at": "2023-11-14T22:13:20.500Z",
        "chunk_index": 2,
        "topic": "geo",
    }
    assert "generation" in meta  # the input is left alone
    # dates already shown as text, or absent, stay as they are
    assert public_metadata({"created_at": "2024-01-01T00:00:00.000Z", "x": 1}) == {
        "created_at": "2024-01-01T00:00:00.000Z",
        "x": 1,
    }
    assert public_metadata({}) == {}


@pytest.mark.parametrize("name", ["abc", "project-notes", "A.b_c-9", "x" * 63, "0a0", "a.b.c"])
def test_valid_collection_names_pass(name: str) -> None:
    assert check_collection_name(name) == name


@pytest.mark.parametrize(
    "name", ["ab", "x" * 64, "-abc", "abc-", "_abc", "ab.", "a..b", "has space", "caf\u00e9", "", None, 123, "abc\n"]
)
def test_invalid_collection_names_are_refused_with_the_rule(name: object) -> None:
    with pytest.raises(AgentloomError) as err:
        check_collection_name(name)
    assert str(err.value) == (
        f"collection name {name!r} is invalid: use 3-63 characters from letters, digits, '.', '_' and '-', "
        "starting and ending with a letter or digit (e.g. 'project-notes')."
    )


def test_the_manifest_collection_name_is_reserved() -> None:
    with pytest.raises(AgentloomError) as err:
        check_collection_name("agentloom-documents")
    assert str(err.value) == "collection name 'agentloom-documents' is reserved by agentloom; choose another name."
    assert check_collection_name("agentloom-documents2") == "agentloom-documents2"


def test_metadata_values_of_every_accepted_kind_pass_unchanged() -> None:
    meta = {"s": "text", "i": -(2**63), "j": 2**63 - 1, "f": 1.5, "b": True, "empty": "", "zero": 0}
    clean = check_metadata(meta)
    assert clean == meta and clean is not meta
    assert check_metadata(None) == {} and check_metadata({}) == {}


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (
            {"": 1},
            "metadata key '' is invalid: keys are non-empty strings not starting with '$' or '#' "
            "(Chroma reserves those).",
        ),
        (
            {"$and": 1},
            "metadata key '$and' is invalid: keys are non-empty strings not starting with '$' or '#' "
            "(Chroma reserves those).",
        ),
        (
            {"#doc": 1},
            "metadata key '#doc' is invalid: keys are non-empty strings not starting with '$' or '#' "
            "(Chroma reserves those).",
        ),
        (
            {3: 1},
            "metadata key 3 is invalid: keys are non-empty strings not starting with '$' or '#' "
            "(Chroma reserves those).",
        ),
        (
            {"generation": 1},
            "metadata['generation'] is set by agentloom (chunk_index, created_at, document_id, "
            "embedding_model, end, generation, start, tokens, updated_at); rename your key.",
        ),
        (
            {"document_id": "x"},
            "metadata['document_id'] is set by agentloom (chunk_index, created_at, document_id, "
            "embedding_model, end, generation, start, tokens, updated_at); rename your key.",
        ),
        (
            {"tags": ["a"]},
            "metadata['tags'] must be a string, number or boolean, got list; flatten nested values or "
            "store them as a JSON string.",
        ),
        (
            {"nothing": None},
            "metadata['nothing'] must be a string, number or boolean, got NoneType; flatten nested "
            "values or store them as a JSON string.",
        ),
        (
            {"big": 2**63},
            "metadata['big'] = 9223372036854775808 does not fit in a 64-bit integer (Chroma's limit); "
            "store it as a string.",
        ),
        (
            {"small": -(2**63) - 1},
            "metadata['small'] = -9223372036854775809 does not fit in a 64-bit integer "
            "(Chroma's limit); store it as a string.",
        ),
    ],
)
def test_metadata_problems_are_refused_with_the_reason(metadata: dict, message: str) -> None:
    with pytest.raises(AgentloomError) as err:
        check_metadata(metadata)
    assert str(err.value) == message


def test_metadata_errors_name_the_field_they_came_from() -> None:
    with pytest.raises(AgentloomError) as err:
        check_metadata({"ok": 1, "$bad": 2}, "documents[2].metadata")
    assert str(err.value).startswith("documents[2].metadata key '$bad' is invalid")
    with pytest.raises(AgentloomError) as err:
        check_metadata({"tokens": 5}, "update")
    assert str(err.value).startswith("update['tokens'] is set by agentloom")
    with pytest.raises(AgentloomError) as err:
        check_metadata({"v": {}}, "update")
    assert str(err.value).startswith("update['v'] must be a string, number or boolean, got dict")
    with pytest.raises(AgentloomError) as err:
        check_metadata({"v": 10**20}, "update")
    assert str(err.value).startswith("update['v'] = 100000000000000000000 does not fit")
