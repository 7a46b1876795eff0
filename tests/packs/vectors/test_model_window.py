"""A chunk_size beyond what the collection's model reads: chunks are capped (with a warning that
names the model's limit), so the text past a cut is still embedded and found. Every built-in model."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client import Client

from agentloom.embeddings.records import BUILTIN_MODELS, DEFAULT_MODEL_KEY
from tests.packs.vectors.conftest import vectors_host
from tests.server.clients import call

FILLER = "The quarterly report lists sales figures for every region and compares them with last year. "
NEEDLE = "Zebra crossings in Reykjavik are painted with glow-in-the-dark paint since 2021."


def long_text(sentences: int = 60) -> str:
    return FILLER * sentences + NEEDLE


@pytest.mark.parametrize("model", [DEFAULT_MODEL_KEY, *BUILTIN_MODELS])
def test_no_model_is_given_a_chunk_longer_than_it_reads(tmp_path: Path, model: str) -> None:
    host = vectors_host(tmp_path, embedding_model=model)
    store = host.packs["vectors"].state.store
    window = store.embeddings.max_tokens(model)
    tokenizer = store.embeddings.tokenizer(model)
    document = store.prepare(model, long_text(), chunk_size=510)
    if window is not None and window - 2 < 510:
        assert document.warning is not None
        assert f"{model!r} reads ({window} tokens" in document.warning and f"capped at {window - 2}" in document.warning
    else:
        assert document.warning is None
    if tokenizer is not None and window is not None:  # the model's own count: nothing past its window
        for chunk in document.chunks:
            assert len(tokenizer.encode(chunk.text).ids) <= window, chunk.text[:80]
    assert NEEDLE in document.chunks[-1].text


@pytest.mark.slow
@pytest.mark.parametrize("model", [DEFAULT_MODEL_KEY, "multilingual-e5-small"])
async def test_the_text_past_the_window_is_found(tmp_path: Path, model: str) -> None:
    host = vectors_host(tmp_path, embedding_model=model)
    async with Client(host.server) as client:
        await call(client, "vector_create_collection", name="reports")
        added = await call(
            client, "vector_add_document", collection="reports", text=long_text(), document_id="report", chunk_size=510
        )
        window = host.packs["vectors"].state.store.embeddings.max_tokens(model)
        assert ("warning" in added) == (window - 2 < 510)
        hits = (
            await call(
                client, "vector_search", collection="reports", query="glow-in-the-dark zebra crossings in Iceland", n=1
            )
        )["results"]
        assert NEEDLE in hits[0]["text"]
        within = await call(
            client, "vector_add_document", collection="reports", text=long_text(), document_id="again", chunk_size=100
        )
        assert "warning" not in within
        bulk = await call(
            client,
            "vector_add_documents",
            collection="reports",
            documents=[{"text": long_text(), "document_id": "bulk"}],
        )
        assert "warning" not in bulk  # the pack's chunk_size (200) is within every built-in model's window
