"""The int8 variant of the local model (`all-MiniLM-L6-v2-int8`) against the float32 default, in one run.

Speed: texts/s on the first 256 SciFact abstracts (truncated at 256 tokens), float32 model, int8
model and sentence-transformers, best of three interleaved passes (the machine is shared).
Quality: SciFact nDCG@10 and Recall@100 over the 300 test queries with exact cosine search
(a dot product over every vector, no index) on all 5183 abstracts, each model with its own
query vectors, embedded one at a time as a search does. The int8 key stays registered only
while its nDCG@10 is within 0.01 of the float32 model.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.report import sentence_transformers_model, write_section
from benchmarks.vectors import load, ndcg_at_10, recall_at_100

EXACT = "all-MiniLM-L6-v2"
INT8 = "all-MiniLM-L6-v2-int8"
SPEED_TEXTS = 256
PASSES = 3
MAX_NDCG_LOSS = 0.01


def rate(fn: Callable[[list[str]], object], texts: list[str]) -> float:
    start = time.perf_counter()
    fn(texts)
    return len(texts) / (time.perf_counter() - start)


def scifact() -> tuple[list[str], list[str], list[str], list[str], dict[str, dict[str, int]]]:
    """SciFact as lists: document ids and texts, test query ids and texts, and the relevance judgements."""
    corpus, queries, qrels = load()
    query_ids = list(queries)
    return [d for d, _ in corpus], [t for _, t in corpus], query_ids, [queries[q] for q in query_ids], qrels


def scores(doc_vectors, query_vectors, doc_ids, queries, qrels) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    import numpy as np

    sims = query_vectors @ doc_vectors.T  # normalised vectors: cosine similarities
    top = np.argsort(-sims, axis=1)[:, :100]
    ndcgs, recalls = [], []
    for row, qid in enumerate(queries):
        ranked = [doc_ids[j] for j in top[row]]
        ndcgs.append(ndcg_at_10(ranked, qrels[qid]))
        recalls.append(recall_at_100(ranked, qrels[qid]))
    return sum(ndcgs) / len(ndcgs), sum(recalls) / len(recalls)


def main() -> None:
    import numpy as np

    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService
    from agentloom.embeddings.bert.build import packaged_source
    from agentloom.embeddings.providers.local import onnx_cache_path
    from agentloom.embeddings.quantize import int8_path

    doc_ids, doc_texts, query_ids, query_texts, qrels = scifact()
    speed_texts = doc_texts[:SPEED_TEXTS]

    with tempfile.TemporaryDirectory() as data:
        # The real cache directory: the int8 file is made there once, as `agentloom models prepare` would.
        settings = Settings(data_dir=Path(data), embeddings={"query_cache_size": 0})
        service = EmbeddingService(settings, BreakerRegistry())
        assert service.prepare().key == EXACT  # the default: registers it in the fresh registry
        messages: list[str] = []
        start = time.perf_counter()
        record = service.prepare(INT8, progress=messages.append)
        prepare_s = time.perf_counter() - start
        assert record.key == INT8 and not record.is_default and service.model().key == EXACT
        made = any("quantising" in m for m in messages)
        exact_file = onnx_cache_path(packaged_source(), settings.cache_dir)
        int8_file = int8_path(exact_file, settings.cache_dir)

        vectors, full_rate = {}, {}
        for key in (EXACT, INT8):
            start = time.perf_counter()
            docs = service.embed_documents(doc_texts, key)
            full_rate[key] = len(doc_texts) / (time.perf_counter() - start)
            # Queries one at a time, as a search embeds them (int8 activation scales are per batch).
            vectors[key] = (docs, np.stack([service.embed_query(q, key) for q in query_texts]))
        batched_queries = service.embed_documents(query_texts, INT8)

        st = sentence_transformers_model()
        runners: dict[str, Callable[[list[str]], object]] = {
            EXACT: lambda ts: service.embed_documents(ts, EXACT),
            INT8: lambda ts: service.embed_documents(ts, INT8),
            "st": lambda ts: st.encode(ts, batch_size=32, normalize_embeddings=True),
        }
        for fn in runners.values():
            fn(speed_texts[:32])  # warm-up
        best = dict.fromkeys(runners, 0.0)
        for _ in range(PASSES):
            for name, fn in runners.items():
                best[name] = max(best[name], rate(fn, speed_texts))
        st_docs = st.encode(speed_texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)

    quality = {key: scores(d, q, doc_ids, query_ids, qrels) for key, (d, q) in vectors.items()}
    cos = np.sum(vectors[EXACT][0] * vectors[INT8][0], axis=1)
    cos_st = np.sum(vectors[INT8][0][:SPEED_TEXTS] * st_docs, axis=1)
    cos_exact_st = np.sum(vectors[EXACT][0][:SPEED_TEXTS] * st_docs, axis=1)
    alone = np.sum(vectors[INT8][1] * batched_queries, axis=1)
    loss = quality[EXACT][0] - quality[INT8][0]
    kept = abs(loss) <= MAX_NDCG_LOSS
    mb = {k: p.stat().st_size / 2**20 for k, p in ((EXACT, exact_file), (INT8, int8_file))}

    body = (
        f"`{INT8}`: the local model with int8 weights (onnxruntime dynamic quantisation, one scale per "
        "output channel, 7-bit weight range, every MatMul and the fused attention), quantised on this "
        f"machine from the default float32 ONNX file at `agentloom models prepare {INT8}` or first use "
        f"({prepare_s:.1f} s{' including quantisation' if made else ', file already cached'}; "
        f"{mb[EXACT]:.0f} MB -> {mb[INT8]:.0f} MB). Same tokenizer, 384 dimensions, never the default. "
        f"CPU: {_isa()}.\n\n"
        f"| {SPEED_TEXTS} SciFact abstracts, 256 tokens, batches of 32 (best of {PASSES}) | texts/s | "
        "vs sentence-transformers | vs float32 |\n|---|---|---|---|\n"
        f"| sentence-transformers (torch, FP32) | {best['st']:.1f} | 1.00x | |\n"
        f"| `{EXACT}` (onnxruntime, FP32, the default) | {best[EXACT]:.1f} | {best[EXACT] / best['st']:.2f}x | 1.00x "
        "|\n"
        f"| `{INT8}` (onnxruntime, int8) | {best[INT8]:.1f} | **{best[INT8] / best['st']:.2f}x** (goal >= 1.3x) | "
        f"{best[INT8] / best[EXACT]:.2f}x |\n\n"
        f"| SciFact, {len(query_ids)} test queries, exact cosine search over all {len(doc_ids)} abstracts | "
        "nDCG@10 | Recall@100 | whole corpus (texts/s) |\n|---|---|---|---|\n"
        f"| `{EXACT}` | {quality[EXACT][0]:.4f} | {quality[EXACT][1]:.3f} | {full_rate[EXACT]:.1f} |\n"
        f"| `{INT8}` | {quality[INT8][0]:.4f} | {quality[INT8][1]:.3f} | {full_rate[INT8]:.1f} |\n"
        f"| difference | {-loss:+.4f} | {quality[INT8][1] - quality[EXACT][1]:+.3f} | |\n\n"
        f"Cosine of int8 to float32 vectors, all {len(doc_ids)} abstracts: min {cos.min():.4f}, mean "
        f"{cos.mean():.4f}; to sentence-transformers, first {SPEED_TEXTS}: min {cos_st.min():.4f}, mean "
        f"{cos_st.mean():.4f} (float32 to sentence-transformers: min {cos_exact_st.min():.4f}). "
        "Activations are quantised with one scale per batch, so an int8 vector depends slightly on its "
        f"batch: the {len(query_ids)} queries alone vs in batches of 32, cosine min {alone.min():.4f}, mean "
        f"{alone.mean():.4f} (the float32 model: identical). "
        "Published exact search with this model: nDCG@10 0.645 (MTEB).\n\n"
        + (
            f"Verdict: nDCG@10 within {MAX_NDCG_LOSS} of the float32 model ({-loss:+.4f}), so `{INT8}` stays "
            "registered as its own model; the default stays float32. Its vectors are not interchangeable with "
            "the float32 model's (cosine above): a collection built with one model is searched with the same one.\n"
            if kept
            else f"Verdict: nDCG@10 differs from the float32 model by {-loss:+.4f} (more than {MAX_NDCG_LOSS}): "
            f"`{INT8}` must not stay registered.\n"
        )
    )
    print(body)
    write_section("Embeddings: int8", body, "python -m benchmarks embeddings-int8")


def _isa() -> str:
    try:
        flags = next(
            line.split(":", 1)[1].split()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        )
    except (OSError, StopIteration):
        return "flags unknown"
    vnni = [f for f in ("avx512_vnni", "avx_vnni") if f in flags]
    wide = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{wide}, {'VNNI (' + ', '.join(vnni) + ')' if vnni else 'no VNNI'}"


if __name__ == "__main__":
    main()
