"""Documents as users meet them: file identity, browsing, compact replies, bulk adds, each
collection's own model. Through a real MCP client on embedded Chroma and a `chroma run` server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from agentloom.packs.vectors.browse import reassemble
from agentloom.packs.vectors.chunking import chunk_text
from agentloom.server.host import Host
from tests.embeddings.conftest import ServerState, http_server  # noqa: F401 - a fixture: a real loopback server
from tests.packs.vectors.conftest import vectors_host
from tests.server.clients import call, error

SKILL = "# {name}\n\n{name} is a Python library. This skill explains how to use {name} well."
DEPENDENCIES = "# Dependencies\n\nDeclare dependencies with Depends() and FastAPI resolves them per request."


def corpus(root: Path) -> Path:
    base = root / "corpus"
    for name in ("fastapi", "typer"):
        (base / name).mkdir(parents=True)
        (base / name / "SKILL.md").write_text(SKILL.format(name=name))
    (base / "fastapi" / "dependencies.md").write_text(DEPENDENCIES)
    return base


async def add_files(client: Client, name: str, *paths: Path) -> dict[str, Any]:
    return await call(client, "vector_add_files", collection=name, paths=[str(p) for p in paths])


@pytest.mark.slow
async def test_a_file_is_one_document_whichever_folder_is_passed(vhost: Host, name: str, tmp_path: Path) -> None:
    base = corpus(tmp_path)
    async with Client(vhost.server) as client:
        await call(client, "vector_create_collection", name=name)
        first = await add_files(client, name, base / "fastapi")
        second = await add_files(client, name, base / "typer")
        assert {d["document_id"] for d in first["documents"]} == {
            "corpus/fastapi/SKILL.md",
            "corpus/fastapi/dependencies.md",
        }
        assert [d["document_id"] for d in second["documents"]] == ["corpus/typer/SKILL.md"]
        assert second["added"] == 1 and second["replaced"] == 0  # typer's SKILL.md did not replace fastapi's
        again = await add_files(client, name, base)  # the parent folder: the same three files
        assert (again["added"], again["replaced"]) == (0, 3) and not again["skipped"]
        listed = await call(client, "vector_list_documents", collection=name)
        assert [d["document_id"] for d in listed["documents"]] == [
            "corpus/fastapi/SKILL.md",
            "corpus/fastapi/dependencies.md",
            "corpus/typer/SKILL.md",
        ]
        fastapi = await call(client, "vector_get_document", collection=name, document_id="corpus/fastapi/SKILL.md")
        assert fastapi["text"] == SKILL.format(name="fastapi")  # not replaced by typer's file
        assert fastapi["metadata"]["source_path"] == str((base / "fastapi" / "SKILL.md").resolve())
        hits = (await call(client, "vector_search", collection=name, query="declare dependencies", n=10))["results"]
        texts = [h["text"] for h in hits]
        assert len(texts) == len(set(texts)) == 3


async def test_an_id_holding_another_file_is_never_overwritten(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root, body in ((one, "First project's readme about apples."), (two, "Second project's readme about pears.")):
        root.mkdir()
        (root / "README.md").write_text(body)
    host = vectors_host(tmp_path, file_roots=[str(one), str(two)])
    async with Client(host.server) as client:
        await call(client, "vector_create_collection", name="ids")
        await add_files(client, "ids", one / "README.md")
        refused = await add_files(client, "ids", two / "README.md")
        assert refused["documents"] == [] and refused["added"] == 0
        [skipped] = refused["skipped"]
        assert skipped["path"] == str(two / "README.md")
        assert "'README.md' already holds file" in skipped["reason"] and str(one / "README.md") in skipped["reason"]
        assert "vector_delete_document" in skipped["reason"]
        kept = await call(client, "vector_get_document", collection="ids", document_id="README.md")
        assert "apples" in kept["text"]
        await call(client, "vector_add_document", collection="ids", document_id="notes.md", text="typed notes")
        (one / "notes.md").write_text("a file with the same name")
        held = await add_files(client, "ids", one / "notes.md")
        assert "a document added with vector_add_document" in held["skipped"][0]["reason"]


@pytest.mark.slow
async def test_browse_documents_in_pages_with_filters(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await call(client, "vector_create_collection", name=name)
        documents = [
            {
                "document_id": f"doc-{i:02d}",
                "text": f"# Title {i}\n\nBody of document {i}.",
                "metadata": {"even": i % 2 == 0, "i": i},
            }
            for i in range(7)
        ]
        bulk = await call(client, "vector_add_documents", collection=name, documents=documents)
        assert (bulk["added"], bulk["replaced"], bulk["total_chunks"]) == (7, 0, 7)
        seen, cursor, pages = [], None, 0
        while True:
            page = await call(
                client, "vector_list_documents", collection=name, limit=3, **({"cursor": cursor} if cursor else {})
            )
            seen += page["documents"]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == 3 and [d["document_id"] for d in seen] == [f"doc-{i:02d}" for i in range(7)]
        assert (
            seen[2]["title"] == "Title 2"
            and seen[2]["chunk_count"] == 1
            and seen[2]["metadata"] == {"even": True, "i": 2}
        )
        assert seen[0]["created_at"].endswith("Z")
        even = await call(
            client, "vector_list_documents", collection=name, filter={"$and": [{"even": True}, {"i": {"$gte": 2}}]}
        )
        assert [d["document_id"] for d in even["documents"]] == ["doc-02", "doc-04", "doc-06"]
        assert "cursor is not one this tool returned" in await error(
            client, "vector_list_documents", collection=name, cursor="bm9wZQ"
        )
        assert "limit must be between 1 and 1000" in await error(
            client, "vector_list_documents", collection=name, limit=0
        )
        assert "vector_list_documents" in await error(
            client, "vector_get_document", collection=name, document_id="nope"
        )


@pytest.mark.slow
async def test_get_document_puts_the_text_back_together(vhost: Host, name: str) -> None:
    text = "\n\n".join(
        f"Paragraph {i}. " + " ".join(f"Sentence {i}.{j} talks about item {j}." for j in range(25)) for i in range(6)
    )
    async with Client(vhost.server) as client:
        await call(client, "vector_create_collection", name=name)
        added = await call(client, "vector_add_document", collection=name, document_id="long", text=text)
        assert added["chunk_count"] > 4 and "chunk_ids" not in added
        got = await call(client, "vector_get_document", collection=name, document_id="long")
        assert got["text"] == text and got["total_characters"] == len(text) and got["next_offset"] is None
        window = await call(
            client, "vector_get_document", collection=name, document_id="long", offset=100, max_characters=50
        )
        assert window["text"] == text[100:150] and window["next_offset"] == 150


def test_reassembly_without_overlap_restores_paragraph_breaks() -> None:
    text = "\n\n".join(" ".join(f"word{i}x{j}" for j in range(40)) for i in range(5))
    chunks = chunk_text(text, tokenizer=None, chunk_tokens=40, overlap_tokens=0, max_tokens=512)
    rebuilt = reassemble([(c.start, c.end, c.text) for c in chunks])
    assert rebuilt.split() == text.split() and rebuilt.count("\n\n") == text.count("\n\n")


async def test_replies_are_compact_and_min_score_cuts(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await call(client, "vector_create_collection", name=name)
        added = await call(
            client,
            "vector_add_document",
            collection=name,
            document_id="cats",
            text="Cats purr and sleep most of the day.",
            include_chunk_ids=True,
        )
        assert len(added["chunk_ids"]) == 1
        await call(
            client,
            "vector_add_document",
            collection=name,
            document_id="rust",
            text="Rust is a systems programming language.",
        )
        hits = (await call(client, "vector_search", collection=name, query="sleepy cats purring", n=5))["results"]
        assert len(hits) == 2 and hits[0]["document_id"] == "cats"
        assert "generation" not in hits[0]["metadata"] and hits[0]["metadata"]["created_at"].endswith("Z")
        cut = hits[0]["score"] - 0.001
        kept = await call(client, "vector_search", collection=name, query="sleepy cats purring", min_score=cut)
        assert [h["document_id"] for h in kept["results"]] == ["cats"]
        none = await call(client, "vector_search", collection=name, query="sleepy cats purring", min_score=1.0)
        assert none["results"] == [] and "scored 1.0 or more" in none["message"]
        assert "min_score must be between 0 and 1" in await error(
            client, "vector_search", collection=name, query="x", min_score=1.5
        )


@pytest.mark.slow
async def test_a_bulk_add_checks_every_document_before_writing(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await call(client, "vector_create_collection", name=name)
        bad = [{"text": "fine", "document_id": "a"}, {"text": "  ", "document_id": "b"}]
        assert "documents[1]: text is empty" in await error(
            client, "vector_add_documents", collection=name, documents=bad
        )
        twice = [{"text": "one", "document_id": "a"}, {"text": "two", "document_id": "a"}]
        assert "repeats documents[0]" in await error(client, "vector_add_documents", collection=name, documents=twice)
        assert "title" in await error(
            client, "vector_add_documents", collection=name, documents=[{"text": "x", "title": "unknown field"}]
        )
        listed = await call(client, "vector_list_documents", collection=name)
        assert listed["documents"] == [] and listed["total"] == 0  # nothing was written
        reported: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reported.append(progress)

        many = [{"text": f"Document number {i} about topic {i % 7}."} for i in range(300)]
        result = await client.call_tool(
            "vector_add_documents", {"collection": name, "documents": many}, progress_callback=on_progress
        )
        assert not result.is_error and result.structured_content["added"] == 300
        assert reported[-1] == 300 and reported == sorted(reported)


async def test_each_collection_searches_with_the_model_that_built_it(
    tmp_path: Path,
    http_server: tuple[str, ServerState],
) -> None:
    url, state = http_server
    host = vectors_host(tmp_path)
    async with Client(host.server) as client:
        await call(client, "vector_create_collection", name="old")
        await call(client, "vector_add_document", collection="old", document_id="cats", text="Cats purr and sleep.")
        await call(client, "vector_add_document", collection="old", document_id="rust", text="Rust compiles fast code.")
        registry = host.embeddings.registry
        registry.upsert_provider("loopback", "openai", base_url=url + "/v1", api_key=state.api_key)
        registry.add_model("small-8", "loopback", dimensions=8, is_default=True)
        found = await call(client, "vector_search", collection="old", query="a sleeping kitten")
        assert found["results"][0]["document_id"] == "cats" and found["warnings"] == []
        added = await call(client, "vector_add_document", collection="old", text="Dogs bark.")
        assert added["embedding_model"] == "all-MiniLM-L6-v2"
        assert not state.requests  # the new default was never asked for the old collection
        new = await call(client, "vector_create_collection", name="new")
        assert (new["embedding_model"], new["embedding_dimensions"]) == ("small-8", 8)
        minilm = registry.get("all-MiniLM-L6-v2")
        assert minilm is not None
        registry.update_model(minilm.id, enabled=False)
        message = await error(client, "vector_search", collection="old", query="kitten")
        assert "collection 'old' was built with embedding model 'all-MiniLM-L6-v2', which is disabled" in message
        assert "agentloom models enable all-MiniLM-L6-v2" in message


async def test_an_overlap_beyond_what_the_model_reads_is_refused_with_the_limit(tmp_path: Path) -> None:
    host = vectors_host(tmp_path)
    async with Client(host.server) as client:
        await call(client, "vector_create_collection", name="limits")
        message = await error(
            client, "vector_add_document", collection="limits", text="some text", chunk_size=300, chunk_overlap=260
        )
        assert "chunk_overlap (260)" in message and "254 tokens" in message and "lower chunk_overlap" in message
