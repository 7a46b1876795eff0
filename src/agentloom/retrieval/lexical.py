"""Keyword search (BM25, via bm25s with English stopwords and the Snowball stemmer) and
reciprocal rank fusion, for hybrid search."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any


def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


class LexicalIndex:
    def __init__(self, ids: list[str], retriever: Any, stemmer: Any) -> None:
        self._ids = ids
        self._position = {chunk_id: i for i, chunk_id in enumerate(ids)}
        self._retriever = retriever
        self._stemmer = stemmer

    @classmethod
    def build(cls, ids: Sequence[str], texts: Sequence[str]) -> LexicalIndex:
        import bm25s

        stemmer = _stemmer()
        retriever = bm25s.BM25()
        if ids:
            tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, show_progress=False)
            retriever.index(tokens, show_progress=False)
        return cls(list(ids), retriever, stemmer)

    def __len__(self) -> int:
        return len(self._ids)

    def search(self, query: str, k: int, allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        """The best k (id, BM25 score) pairs, among `allowed` ids when given; no match -> []."""
        import bm25s
        import numpy as np

        if not self._ids or not query.strip() or k <= 0:
            return []
        terms = bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False)[0]
        terms = [t for t in terms if t]
        if not terms:
            return []
        scores = np.asarray(self._retriever.get_scores(terms), dtype=np.float32)
        if allowed is not None:
            mask = np.zeros(len(scores), dtype=bool)
            positions = [self._position[i] for i in allowed if i in self._position]
            mask[positions] = True
            scores = np.where(mask, scores, 0.0)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(self._ids[i], float(scores[i])) for i in top if scores[i] > 0]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """Fuse rankings by sum of weight / (k + rank); best first, ties by first appearance."""
    weights = weights or [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("weights must have one entry per ranking")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda kv: -kv[1])
