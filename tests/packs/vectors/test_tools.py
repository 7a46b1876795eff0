"""The vectors pack through an MCP client, on embedded Chroma and on a real Chroma server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from agentloom.server.host import Host
from tests.server.clients import call, error

DOCS = {
    "cats": "Cats are small domesticated felines. They purr, hunt mice and sleep most of the day.",
    "rust": "Rust is a systems programming language focused on memory safety without garbage collection.",
    "bread": "To bake bread, mix flour, water, salt and yeast, knead the dough, let it rise, then bake it.",
}


async def seed(client: Client, name: str) -> None:
    await call(client, "vector_create_collection", name=name, metadata={"team": "docs"})
    for i, (doc_id, text) in enumerate(DOCS.items()):
        await call(
            client,
            "vector_add_document",
            collection=name,
            document_id=doc_id,
            text=text,
            metadata={"topic": doc_id, "rank": i, "tags": f"tag-{doc_id} shared"},
        )


async def test_collections_lifecycle(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        created = await call(client, "vector_create_collection", name=name, metadata={"team": "docs"})
        assert created["embedding_model"] == "all-MiniLM-L6-v2" and created["embedding_dimensions"] == 384
        assert "already exists" in await error(client, "vector_create_collection", name=name)
        assert "3-63 characters" in await error(client, "vector_create_collection", name="a/b")
        listed = {c["name"]: c for c in (await call(client, "vector_list_collections"))["collections"]}
        assert listed[name]["metadata"] == {"team": "docs"} and listed[name]["chunk_count"] == 0
        await call(client, "vector_add_document", collection=name, document_id="d", text="hello world")
        assert await call(client, "vector_delete_collection", name=name) == {"name": name, "deleted": True}
        assert name not in {c["name"] for c in (await call(client, "vector_list_collections"))["collections"]}
        assert "not found" in await error(client, "vector_search", collection=name, query="hello")


@pytest.mark.slow
async def test_add_chunks_long_documents_within_the_model_limit(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await call(client, "vector_create_collection", name=name)
        paragraphs = [
            f"Paragraph {i}. " + " ".join(f"sentence {i}-{j} about topic {j}." for j in range(30)) for i in range(8)
        ]
        text = "\n\n".join(paragraphs)
        added = await call(
            client,
            "vector_add_document",
            collection=name,
            document_id="long",
            text=text,
            metadata={"kind": "test"},
            include_chunk_ids=True,
        )
        assert added["chunk_count"] > 5 and len(added["chunk_ids"]) == added["chunk_count"]
        info = await call(client, "vector_document_info", collection=name, document_id="long")
        assert info["chunk_count"] == added["chunk_count"]
        assert info["chunk_tokens"]["max"] <= 254
        assert info["metadata"] == {"kind": "test"}
        hit = (await call(client, "vector_search", collection=name, query="sentence 3-7 about topic 7", n=1))[
            "results"
        ][0]
        meta = hit["metadata"]
        assert {"document_id", "chunk_index", "start", "end", "created_at", "updated_at", "embedding_model"} <= set(
            meta
        )
        assert text[meta["start"] : meta["end"]] == hit["text"]


@pytest.mark.slow
async def test_search_ranks_scores_and_limits(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await seed(client, name)
        found = await call(client, "vector_search", collection=name, query="kitten purring", n=2)
        assert [r["document_id"] for r in found["results"]][0] == "cats"
        assert len(found["results"]) == 2
        scores = [r["score"] for r in found["results"]]
        assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
        assert found["message"] is None


@pytest.mark.slow
async def test_filters(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await seed(client, name)

        async def ids(**kw: Any) -> list[str]:
            res = await call(client, "vector_search", collection=name, query="anything at all", n=10, **kw)
            return sorted(r["document_id"] for r in res["results"])

        assert await ids(filter={"topic": "rust"}) == ["rust"]
        assert await ids(filter={"topic": {"$ne": "rust"}}) == ["bread", "cats"]
        assert await ids(filter={"topic": {"$in": ["cats", "bread"]}}) == ["bread", "cats"]
        assert await ids(filter={"rank": {"$gte": 1}}) == ["bread", "rust"]
        assert await ids(filter={"rank": {"$gt": 0, "$lt": 2}}) == ["rust"]
        assert await ids(filter={"tags": {"$contains": "tag-br"}}) == ["bread"]
        assert await ids(filter={"tags": {"$contains": "shared"}, "rank": {"$lte": 1}}) == ["cats", "rust"]
        assert await ids(filter={"$and": [{"topic": {"$ne": "cats"}}, {"rank": {"$lt": 2}}]}) == ["rust"]
        assert await ids(document_contains="flour") == ["bread"]
        assert await ids(filter={"created_at": {"$gte": "2000-01-01"}}) == ["bread", "cats", "rust"]
        none = await call(client, "vector_search", collection=name, query="x", filter={"topic": "nope"})
        assert none["results"] == [] and none["message"] and none["warnings"]
        bad = await error(client, "vector_search", collection=name, query="x", filter={"rank": {"$between": [1, 2]}})
        assert "$between" in bad and "$gte" in bad


@pytest.mark.slow
async def test_same_id_replaces_update_and_delete(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await seed(client, name)
        again = await call(
            client,
            "vector_add_document",
            collection=name,
            document_id="cats",
            text="Dogs are loyal companions that bark.",
            metadata={"topic": "dogs"},
        )
        assert again["replaced"] is True
        res = await call(client, "vector_search", collection=name, query="loyal barking dogs", n=10)
        cats = [r for r in res["results"] if r["document_id"] == "cats"]
        assert len(cats) == again["chunk_count"] == 1 and "Dogs" in cats[0]["text"]
        updated = await call(client, "vector_update_document", collection=name, document_id="cats", text=DOCS["cats"])
        assert updated["replaced"] is True
        info = await call(client, "vector_document_info", collection=name, document_id="cats")
        assert info["chunk_count"] == 1 and info["metadata"] == {}
        assert "not found" in await error(
            client, "vector_update_document", collection=name, document_id="nope", text="x"
        )
        deleted = await call(client, "vector_delete_document", collection=name, document_id="cats")
        assert deleted["deleted_chunks"] == 1
        res = await call(client, "vector_search", collection=name, query="cats purr", n=10)
        assert "cats" not in {r["document_id"] for r in res["results"]}
        assert "not found" in await error(client, "vector_document_info", collection=name, document_id="cats")
        assert "not found" in await error(client, "vector_delete_document", collection=name, document_id="cats")


@pytest.mark.slow
async def test_one_per_document_and_hybrid(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await call(client, "vector_create_collection", name=name)
        long_text = "\n\n".join(f"Section {i}. Felines and cats purr when content. " * 12 for i in range(4))
        await call(client, "vector_add_document", collection=name, document_id="catbook", text=long_text)
        await call(
            client,
            "vector_add_document",
            collection=name,
            document_id="codes",
            text="Part number ZX-4471-QK ships in blue boxes.",
        )
        many = await call(client, "vector_search", collection=name, query="cats purring", n=5)
        assert len({r["document_id"] for r in many["results"]}) < len(many["results"])
        one = await call(client, "vector_search", collection=name, query="cats purring", n=5, one_per_document=True)
        assert sorted(r["document_id"] for r in one["results"]) == ["catbook", "codes"]
        hybrid = await call(client, "vector_search", collection=name, query="ZX-4471-QK", n=1, hybrid=True)
        assert hybrid["mode"] == "hybrid" and hybrid["results"][0]["document_id"] == "codes"
        assert 0 <= hybrid["results"][0]["score"] <= 1


async def test_add_files_and_folders(vhost: Host, name: str, tmp_path: Path) -> None:
    async with Client(vhost.server) as client:
        docs = tmp_path / "docs"
        (docs / "guide").mkdir(parents=True)
        (docs / "guide" / "install.md").write_text("# Install\n\nRun the setup script to install everything.")
        (docs / "notes.txt").write_text("Plain text notes about deployment.")
        (docs / "image.md").write_bytes(b"\x89PNG\x00\x00binary")
        (docs / "ignored.py").write_text("print('not indexed')")
        await call(client, "vector_create_collection", name=name)
        reported: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reported.append(progress)

        result = await client.call_tool(
            "vector_add_files", {"collection": name, "paths": [str(docs)]}, progress_callback=on_progress
        )
        added = result.structured_content
        assert added is not None and not result.is_error
        assert sorted(d["document_id"] for d in added["documents"]) == ["docs/guide/install.md", "docs/notes.txt"]
        assert [s["reason"] for s in added["skipped"]] == ["binary file"]
        assert added["total_chunks"] == 2
        hit = (await call(client, "vector_search", collection=name, query="how to install", n=1))["results"][0]
        assert hit["document_id"] == "docs/guide/install.md" and hit["metadata"]["file_name"] == "install.md"
        assert "does not exist" in await error(
            client, "vector_add_files", collection=name, paths=[str(tmp_path / "no")]
        )


async def test_validation_errors_name_the_field(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await call(client, "vector_create_collection", name=name)
        assert "text is empty" in await error(client, "vector_add_document", collection=name, text="  ")
        assert "set by agentloom" in await error(
            client, "vector_add_document", collection=name, text="x", metadata={"document_id": "mine"}
        )
        assert "n must be between" in await error(client, "vector_search", collection=name, query="x", n=0)
        assert "chunk_overlap" in await error(
            client, "vector_add_document", collection=name, text="x", chunk_size=50, chunk_overlap=60
        )


def _numbers(value: Any) -> list[int | float]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


async def test_chroma_style_arguments_are_refused_not_ignored(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await seed(client, name)
        text = await error(client, "vector_search", collection=name, query="cats", where={"topic": "rust"}, n_results=1)
        assert text.startswith(
            "vector_search does not take `where`, `n_results`. Accepted arguments: collection, query, n, filter"
        )
        # The accepted spelling works: the filter really applies.
        hits = (await call(client, "vector_search", collection=name, query="cats", filter={"topic": "rust"}, n=1))[
            "results"
        ]
        assert [h["document_id"] for h in hits] == ["rust"]


@pytest.mark.slow
async def test_replies_hold_no_integer_a_javascript_client_would_round(vhost: Host, name: str) -> None:
    async with Client(vhost.server) as client:
        await seed(client, name)
        replies = [
            await call(client, "vector_search", collection=name, query="bread", n=3),
            await call(client, "vector_search", collection=name, query="bread", n=3, hybrid=True),
            await call(client, "vector_document_info", collection=name, document_id="bread"),
            await call(client, "vector_list_collections"),
        ]
    for reply in replies:
        assert all(abs(n) <= 2**53 for n in _numbers(reply)), reply
    meta = replies[0]["results"][0]["metadata"]
    assert "generation" not in meta and meta["created_at"].startswith("20")  # ISO date, as filters take it


async def test_add_files_to_a_bad_collection_is_refused_not_skipped(vhost: Host, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nSome text.")
    async with Client(vhost.server) as client:
        assert "3-63 characters" in await error(
            client, "vector_add_files", collection="a/b", paths=[str(tmp_path / "a.md")]
        )
        assert "not found" in await error(
            client, "vector_add_files", collection="nope-nope", paths=[str(tmp_path / "a.md")]
        )
