"""Flowise pack, learning store: save and find latency at 50, 500 and 5,000 stored designs.

The corpus is generated: requests combine a kind of assistant, a task, a source and an extra
(``"a support bot that answers questions over our Confluence pages and remembers the chat"``),
each stored with one of a few real designs. Stores are filled in batches with the same record
layout as ``flowise_save_artifact`` (``learning.artifact_metadata``); the timed saves and finds
go through ``LearningStore.save`` and ``.find`` one request at a time, in-process, with the
default model (the embedding of the request is part of both).
"""

from __future__ import annotations

import functools
import itertools
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.report import percentile, write_section

SIZES = (50, 500, 5000)
KINDS = [
    "a support bot",
    "an internal assistant",
    "a sales helper",
    "a tutor",
    "a research agent",
    "a chatbot",
    "a help desk agent",
    "an onboarding guide",
    "a coding helper",
    "a legal assistant",
]
TASKS = [
    "that answers questions",
    "that summarises documents",
    "that drafts replies",
    "that searches the web",
    "that explains policies",
    "that looks up orders",
    "that writes reports",
    "that translates messages",
]
SOURCES = [
    "over our PDF manuals",
    "over our Confluence pages",
    "from a CSV of products",
    "over a GitHub repository",
    "from our website",
    "over Notion notes",
    "from a SQL database",
    "with no documents",
]
EXTRAS = [
    "and remembers the chat",
    "with a calculator tool",
    "in a friendly tone",
    "with short answers",
    "and cites its sources",
    "for German customers",
]
AUDIENCES = ["for our team", "for customers", "for new hires"]
DESIGNS = [
    {
        "nodes": [
            "pdfFile",
            "recursiveCharacterTextSplitter",
            "openAIEmbeddings",
            "memoryVectorStore",
            "chatOpenAI",
            "bufferMemory",
            "conversationalRetrievalQAChain",
        ],
        "connections": [],
        "config": {},
    },
    {"nodes": ["chatOpenAI", "bufferMemory", "conversationChain"], "connections": [], "config": {}},
    {"nodes": ["chatOpenAI", "calculator", "serpAPI", "bufferMemory", "toolAgent"], "connections": [], "config": {}},
]
QUERIES = [
    "a bot answering questions about our PDF handbooks that keeps the conversation",
    "an agent that can do maths and search the internet",
    "summarise our Notion pages for new hires",
    "help customers find their orders in the database",
    "a friendly chatbot with memory",
]


def _requests(n: int, rng: random.Random) -> list[str]:
    every = [" ".join(parts) for parts in itertools.product(KINDS, TASKS, SOURCES, EXTRAS, AUDIENCES)]
    assert len(every) >= n, f"only {len(every)} distinct requests"
    rng.shuffle(every)
    return every[:n]


def _fill(store: Any, count: int, rng: random.Random) -> None:
    from agentloom.packs.flowise.learning import ARTIFACTS, artifact_metadata, new_id

    collection = store.collection(ARTIFACTS)
    model = store._model_of(collection)
    requests = _requests(count, rng)
    for start in range(0, count, 500):
        batch = requests[start : start + 500]
        vectors = store.embeddings.embed_documents(batch, model)
        metadatas = [
            artifact_metadata({"spec": "", "plan": "", "tasks": ""}, rng.choice(DESIGNS), None, True, None, {})
            for _ in batch
        ]
        ids = [new_id("a") for _ in batch]
        store.connection.call(
            functools.partial(collection.add, ids=ids, documents=batch, embeddings=vectors, metadatas=metadatas)
        )


def _measure(size: int) -> dict[str, float]:
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService
    from agentloom.packs.flowise.learning import LearningStore
    from agentloom.packs.vectors.settings import VectorSettings
    from agentloom.retrieval.connection import ChromaConnection

    rng = random.Random(size)
    with tempfile.TemporaryDirectory() as tmp:
        breakers = BreakerRegistry()
        embeddings = EmbeddingService(Settings(data_dir=Path(tmp)), breakers)
        chroma = ChromaConnection(VectorSettings(mode="embedded", path=Path(tmp) / "chroma"), breakers)
        store = LearningStore(chroma, embeddings, None)
        _fill(store, size - 20, rng)
        saves = []
        for request in _requests(20, random.Random(size + 1)):
            start = time.perf_counter()
            store.save(
                request + " (new)", {"spec": "s", "plan": "p", "tasks": "t"}, rng.choice(DESIGNS), None, True, None, {}
            )
            saves.append((time.perf_counter() - start) * 1000)
        finds, offered = [], []
        for round_ in range(40):
            query = f"{QUERIES[round_ % len(QUERIES)]} #{round_}"  # uncached query embeddings
            start = time.perf_counter()
            designs = store.find(query, {})
            finds.append((time.perf_counter() - start) * 1000)
            offered.append(len(designs))
    return {
        "save_p50": statistics.median(saves),
        "find_p50": statistics.median(finds),
        "find_p95": percentile(finds, 95),
        "offered": statistics.mean(offered),
    }


def main() -> None:
    rows = []
    for size in SIZES:
        result = _measure(size)
        rows.append(
            f"| {size:,} | {result['save_p50']:.1f} | {result['find_p50']:.1f} | {result['find_p95']:.1f} | "
            f"{result['offered']:.1f} |"
        )
        print(size, result, flush=True)
    body = "\n".join(
        [
            "Stored designs in the pack's embedded ChromaDB, default model; one request at a time, in-process, "
            "query embedding included (uncached). Goal: find p95 ≤ 20 ms at 5,000 (the seed asks < 500 ms at 50).",
            "",
            "| stored designs | save p50 ms | find p50 ms | find p95 ms | designs offered (mean) |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )
    write_section("Flowise learning", body, "python -m benchmarks flowise-learning")


if __name__ == "__main__":
    main()
