"""The vectors pack in the real server process, over stdio, as an MCP client launches it."""

from __future__ import annotations

import pytest

from tests.server.clients import stdio_client_session

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


async def test_vectors_over_stdio(server_env: dict[str, str]) -> None:
    async with stdio_client_session(server_env, "--packs", "vectors") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {
            "vector_create_collection",
            "vector_list_collections",
            "vector_delete_collection",
            "vector_add_document",
            "vector_add_files",
            "vector_search",
            "vector_update_document",
            "vector_delete_document",
            "vector_document_info",
        } <= set(tools)
        assert (
            tools["vector_search"].annotations is not None and tools["vector_search"].annotations.read_only_hint is True
        )
        assert (
            tools["vector_delete_collection"].annotations is not None
            and tools["vector_delete_collection"].annotations.destructive_hint is True
        )
        assert all(t.output_schema for name, t in tools.items() if name.startswith("vector_"))
        await client.call_tool("vector_create_collection", {"name": "notes"})
        added = (
            await client.call_tool(
                "vector_add_document",
                {"collection": "notes", "document_id": "n1", "text": "The deploy script lives in ops/deploy.sh."},
            )
        ).structured_content
        assert added["chunk_count"] == 1 and "chunk_ids" not in added
        found = (
            await client.call_tool("vector_search", {"collection": "notes", "query": "where is the deploy script"})
        ).structured_content
        health = (await client.call_tool("health", {"check_model": False})).structured_content
    assert found["results"][0]["document_id"] == "n1" and found["results"][0]["score"] > 0.5
    checks = {c["name"]: c for c in health["checks"]}
    assert any(name.startswith("vector store (embedded Chroma") and c["ok"] for name, c in checks.items())


async def test_nested_metadata_is_refused_in_one_line_naming_the_allowed_types(server_env: dict[str, str]) -> None:
    from tests.server.clients import error

    async with stdio_client_session(server_env, "--packs", "vectors") as client:
        await client.call_tool("vector_create_collection", {"name": "notes"})
        message = await error(
            client,
            "vector_add_document",
            collection="notes",
            document_id="n1",
            text="x",
            metadata={"a": {"b": 1}, "tags": ["x"], "ok": 1},
        )
    assert message == (
        "vector_add_document: `metadata.a`: nested objects are not allowed; values must be strings, numbers or "
        "booleans; `metadata.tags`: nested arrays are not allowed; values must be strings, numbers or booleans."
    )
