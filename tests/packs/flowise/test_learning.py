"""Learning from past designs through a real MCP client: save, find, reuse or reject, rate; real Chroma and model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from tests.packs.flowise.fake_flowise import FakeFlowise
from tests.packs.flowise.test_catalog import trim
from tests.packs.flowise.test_tools import host, stored_flow
from tests.packs.flowise.tokens import tokens
from tests.server.clients import call, error

RAG = {
    "nodes": [
        "pdfFile",
        "recursiveCharacterTextSplitter",
        "openAIEmbeddings",
        "memoryVectorStore",
        "chatOpenAI",
        "bufferMemory",
        "conversationalRetrievalQAChain",
    ],
    "connections": [
        ["recursiveCharacterTextSplitter", "pdfFile"],
        ["pdfFile", "memoryVectorStore"],
        ["openAIEmbeddings", "memoryVectorStore"],
        ["memoryVectorStore", "conversationalRetrievalQAChain"],
        ["chatOpenAI", "conversationalRetrievalQAChain"],
        ["bufferMemory", "conversationalRetrievalQAChain"],
    ],
    "config": {"chatOpenAI": {"temperature": 0.1}},
}
CHAT = {
    "nodes": ["chatOpenAI", "bufferMemory", "conversationChain"],
    "connections": [["chatOpenAI", "conversationChain"], ["bufferMemory", "conversationChain"]],
}
SPEC = {
    "spec": "# Spec\nA chatbot answering from the user's PDFs, remembering the chat.",
    "plan": "1. loader 2. store 3. chain",
    "tasks": ["load", "split", "embed", "chain"],
}


async def save(client: Client, request: str, design: dict, **extra: object) -> str:
    return (await call(client, "flowise_save_artifact", request=request, design=design, **SPEC, **extra))["artifact_id"]


@pytest.mark.slow
async def test_save_find_reuse_reject_rate(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    served = host(tmp_path, fake)
    async with Client(served.server) as client:
        await call(client, "flowise_refresh_catalog")
        rag = await save(
            client,
            "a chatbot that answers questions about my PDF documents and remembers the chat",
            RAG,
            chatflow_id="c1",
        )
        chat = await save(client, "a plain chatbot with memory, no documents", CHAT)
        failed = await save(
            client,
            "a chatbot answering from PDF files with memory of the conversation",
            RAG,
            success=False,
            reason="Flowise rejected the memory node",
        )

        found = await call(
            client, "flowise_find_design", request="chat with my PDF files and keep the conversation history"
        )
        assert tokens(found) < 500, found
        assert [d["artifact_id"] for d in found["designs"]][0] == rag
        assert failed not in [d["artifact_id"] for d in found["designs"]], "failures are never offered"
        best = found["designs"][0]
        assert best["similarity"] > 0.70 and best["nodes"] == RAG["nodes"] and best["config"] == RAG["config"]

        nothing = await call(client, "flowise_find_design", request="translate Japanese invoices into a spreadsheet")
        assert nothing["designs"] == [] and "full design" in nothing["message"]

        reused = await call(client, "flowise_reuse_design", artifact_id=rag, approve=True)
        total = tokens(
            {
                "name": "flowise_find_design",
                "arguments": {"request": "chat with my PDF files and keep the conversation history"},
            }
        )
        total += tokens(found) + tokens(
            {"name": "flowise_reuse_design", "arguments": {"artifact_id": rag, "approve": True}}
        )
        total += tokens(reused)
        assert total < 600, total
        flow = stored_flow(fake, reused["chatflow_id"])
        edges = {(e["source"], e["target"]) for e in flow["edges"]}
        assert ("memoryVectorStore_0", "conversationalRetrievalQAChain_0") in edges and len(edges) == 6
        model = next(n for n in flow["nodes"] if n["id"] == "chatOpenAI_0")
        assert model["data"]["inputs"]["temperature"] == 0.1
        assert "issues" not in reused, reused

        assert "reason is required" in await error(client, "flowise_reuse_design", artifact_id=chat, approve=False)
        rejected = await call(client, "flowise_reuse_design", artifact_id=chat, approve=False, reason="needs documents")
        assert rejected["recorded"] is True and "full design" in rejected["next"]
        assert "failed design" in await error(client, "flowise_reuse_design", artifact_id=failed, approve=True)
        assert "not found" in await error(client, "flowise_reuse_design", artifact_id="a00000000", approve=True)

        assert (await call(client, "flowise_rate", artifact_id=rag, stars=5))["rating"] == 5
        assert "outside 1-5" in await error(client, "flowise_rate", artifact_id=rag, stars=6)

    state = served.packs["flowise"].state
    sessions = state.learning.collection("sessions").get(include=["metadatas", "documents"])
    outcomes = sorted(m["outcome"] for m in sessions["metadatas"])
    assert outcomes == ["rejected", "reused"]  # no build_flow call in this test
    assert all(m["tokens"] > 0 and m["seconds"] >= 0 for m in sessions["metadatas"])
    _, metadata = state.learning.get(chat)
    assert metadata["rejections"] == 1 and metadata["last_rejection"] == "needs documents"
    _, metadata = state.learning.get(rag)
    assert metadata["rating"] == 5 and json.loads(metadata["node_versions"])["chatOpenAI"] == 8.3


@pytest.mark.slow
async def test_ties_ratings_and_catalog_checks(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    async with Client(host(tmp_path, fake).server) as client:
        await call(client, "flowise_refresh_catalog")
        request = "a customer support chatbot that remembers the conversation"
        first = await save(client, request, CHAT)
        second = await save(
            client,
            request,
            {
                **CHAT,
                "nodes": ["chatAnthropic", "bufferMemory", "conversationChain"],
                "connections": [["chatAnthropic", "conversationChain"], ["bufferMemory", "conversationChain"]],
            },
        )
        old = await save(
            client,
            request,
            {**CHAT, "nodes": ["chatOpenAI", "bufferMemory", "conversationalAgent", "gone"], "connections": []},
        )
        found = await call(client, "flowise_find_design", request=request)
        ids = [d["artifact_id"] for d in found["designs"]]
        assert sorted(ids) == sorted([first, second, old]), "equal scores lie within 5 %: the top 3"
        flagged = next(d for d in found["designs"] if d["artifact_id"] == old)
        assert flagged["missing"] == ["gone"] and flagged["deprecated"] == ["conversationalAgent"]

        await call(client, "flowise_rate", artifact_id=second, stars=5)
        await call(client, "flowise_rate", artifact_id=first, stars=1)
        ranked = [d["artifact_id"] for d in (await call(client, "flowise_find_design", request=request))["designs"]]
        assert ranked[0] == second  # 5 stars: +0.04
        assert first not in ranked  # 1 star: -0.04, no longer within 5 % of the best
        assert "design nodes not on this Flowise: gone" in await error(
            client, "flowise_reuse_design", artifact_id=old, approve=True
        )


async def test_save_refusals(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    async with Client(host(tmp_path, trim(fake_flowise)).server) as client:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"request": "x", "design": {"nodes": []}}, "design.nodes"),
            ({"request": "x", "design": {"nodes": ["a"], "connections": [["a", "b"]]}}, "not in design.nodes: b"),
            ({"request": "x", "design": {"nodes": ["a"], "edges": []}}, "unknown keys ['edges']"),
            ({"request": "x", "design": CHAT, "success": False}, "reason is required"),
            ({"request": "  ", "design": CHAT}, "request is empty"),
        ]
        for arguments, expected in cases:
            message = await error(client, "flowise_save_artifact", **SPEC, **arguments)
            assert expected in message and tokens(message) < 50, message


async def test_designs_are_offered_unchecked_before_any_catalog(tmp_path: Path) -> None:
    with FakeFlowise() as fake:
        pass  # stopped: Flowise unreachable, no catalog ever fetched
    async with Client(host(tmp_path, fake).server) as client:
        saved = await save(client, "a plain chatbot with memory, no documents", CHAT)
        found = await call(client, "flowise_find_design", request="a plain chatbot with memory")
    assert [d["artifact_id"] for d in found["designs"]] == [saved]
    assert "missing" not in found["designs"][0]
