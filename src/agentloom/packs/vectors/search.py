"""Search: filters applied before the vector search, optional hybrid (BM25 + vectors, RRF).

Scores are cosine similarities in [0, 1] (negative similarities clamp to 0) for every
result, hybrid ones included; hybrid changes the order (fused rank), not the meaning of
the score.

Only current chunks count, and the filtering happens inside the Chroma query (see
store.py): when a query's hits include chunks of a generation that is not current, it runs
again with a guard admitting only the current generation of the documents found with
such chunks, so left-over chunks never take places in the top n.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from agentloom.core.dependency import first_line
from agentloom.core.errors import AgentloomError
from agentloom.packs.vectors.filters import ACCEPTED, FilterPlan, parse_filter
from agentloom.packs.vectors.records import public_metadata
from agentloom.packs.vectors.replies import SearchHit, SearchResult
from agentloom.packs.vectors.store import VectorStore, chroma_refused
from agentloom.retrieval.columns import column
from agentloom.retrieval.lexical import LexicalIndex, reciprocal_rank_fusion

if TYPE_CHECKING:
    import numpy as np
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import WhereDocument

T = TypeVar("T")

MAX_RESULTS = 100
CANDIDATE_FACTOR = 5  # hybrid and per-document collapsing look deeper than n
MAX_ROUNDS = 6  # queries per search when stale chunks keep surfacing (each round guards more documents)
MAX_GUARDED = 300  # documents named in one guard: keeps the where clause far below SQLite's limits
MAX_DEPTH = 1000  # how deep a search looks for n distinct results


class Searcher:
    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self._lexical: dict[str, tuple[int, LexicalIndex]] = {}
        self._dirty: dict[str, set[str]] = {}  # per collection: documents seen with non-current chunks
        self._lock = threading.Lock()
        store.changed.append(self._forget)

    def _forget(self, collection: str) -> None:
        with self._lock:
            self._lexical.pop(collection, None)
            self._dirty.pop(collection, None)  # a write cleans its document's leftovers

    # -- lexical index, cached per collection and rebuilt when its size changes ------------------
    def _lexical_index(self, collection: Collection) -> LexicalIndex:
        count = self.store.connection.call(collection.count)
        with self._lock:
            cached = self._lexical.get(collection.name)
        if cached is not None and cached[0] == count:
            return cached[1]
        got = self.store.connection.call(lambda: collection.get(include=["documents", "metadatas"]))
        current = self.store.generations(collection.name)
        ids, documents = got["ids"], got["documents"] or []
        keep = [k for k, m in enumerate(got["metadatas"] or []) if _is_current(m, current)]
        index = LexicalIndex.build([ids[k] for k in keep], [documents[k] for k in keep])
        with self._lock:
            self._lexical[collection.name] = (count, index)
        return index

    # -- search ----------------------------------------------------------------------------------
    def search(
        self,
        collection_name: str,
        query: str,
        n: int = 5,
        filter: Mapping[str, Any] | None = None,
        document_contains: str | None = None,
        hybrid: bool = False,
        one_per_document: bool = False,
        min_score: float | None = None,
    ) -> SearchResult:
        if not isinstance(query, str) or not query.strip():
            raise AgentloomError("query is empty: pass the text to search for.")
        if not 1 <= n <= MAX_RESULTS:
            raise AgentloomError(f"n must be between 1 and {MAX_RESULTS}, got {n}.")
        if min_score is not None and not 0.0 <= min_score <= 1.0:
            raise AgentloomError(f"min_score must be between 0 and 1 (a cosine similarity), got {min_score}.")
        plan = parse_filter(filter, document_contains)
        collection = self.store.collection(collection_name)
        vector = self.store.embeddings.embed_query(query, self.store.collection_model(collection))

        allowed = self._candidates(collection, plan)
        if allowed is not None and not allowed:
            return _empty(collection_name, hybrid, ["the filters exclude every chunk of the collection"])
        depth = n * CANDIDATE_FACTOR if (hybrid or one_per_document) else n
        while True:
            hits = self._ranked(collection, query, vector, plan, allowed, depth, hybrid)
            found = len(hits)
            hits = _distinct(hits, one_per_document)
            # Duplicates (the same text stored twice) took places: look deeper, unless nothing is left.
            if len(hits) >= n or found < depth or depth >= MAX_DEPTH:
                break
            depth = min(MAX_DEPTH, depth * 2)
        if min_score is not None:
            hits = [h for h in hits if h["score"] >= min_score]
        results: list[SearchHit] = [
            {
                "document_id": h["document_id"],
                "chunk_id": h["chunk_id"],
                "text": h["text"],
                "metadata": h["metadata"],
                "score": h["score"],
            }
            for h in hits[:n]
        ]
        if not results:
            filtered = allowed is not None or plan.where is not None or plan.document_contains is not None
            if filtered:
                return _empty(
                    collection_name,
                    hybrid,
                    ["the filters exclude every chunk: loosen or remove them"],
                    "no chunk matched the filters",
                )
            if min_score is not None and found:
                return _empty(collection_name, hybrid, [], f"no chunk scored {min_score} or more")
            return _empty(collection_name, hybrid, [])
        return {
            "collection": collection_name,
            "mode": "hybrid" if hybrid else "vector",
            "results": results,
            "message": None,
            "warnings": [],
        }

    def _ranked(
        self,
        collection: Collection,
        query: str,
        vector: np.ndarray,
        plan: FilterPlan,
        allowed: list[str] | None,
        depth: int,
        hybrid: bool,
    ) -> list[dict[str, Any]]:
        """Current chunks, best first: by vector similarity, or fused with BM25 (hybrid)."""
        hits = self._vector_hits(collection, vector, plan, allowed, depth)
        if hybrid:
            lexical = self._lexical_index(collection).search(query, depth, allowed)
            order = [i for i, _ in reciprocal_rank_fusion([[h["id"] for h in hits], [i for i, _ in lexical]])]
            hits_by_id = {h["id"]: h for h in hits}
            missing = [i for i in order if i not in hits_by_id]
            for extra in self._fetch(collection, missing, vector):
                hits_by_id[extra["id"]] = extra
            hits = [hits_by_id[i] for i in order if i in hits_by_id]
        return self._current_only(collection.name, hits)

    def _candidates(self, collection: Collection, plan: FilterPlan) -> list[str] | None:
        """Ids allowed by filters Chroma cannot apply itself (substring of metadata); None = no restriction."""
        if not plan.substrings:
            return None
        got = self._filtered(
            lambda: collection.get(where=plan.where, where_document=_where_document(plan), include=["metadatas"])
        )
        current = self.store.generations(collection.name)
        metadatas = column(got["metadatas"], "metadatas")
        return [i for i, m in zip(got["ids"], metadatas) if plan.matches(m) and _is_current(m, current)]

    def _vector_hits(
        self, collection: Collection, vector: np.ndarray, plan: FilterPlan, allowed: list[str] | None, depth: int
    ) -> list[dict[str, Any]]:
        if allowed is not None:  # already current chunks only
            return self._query(collection, vector, depth, ids=allowed)
        name = collection.name
        with self._lock:
            dirty = set(self._dirty.get(name, ()))
        hits: list[dict[str, Any]] = []
        for _ in range(MAX_ROUNDS):
            guard = _guard(dirty, self.store.current_generations(name, dirty) if dirty else {})
            where = plan.where if guard is None else guard if plan.where is None else {"$and": [plan.where, guard]}
            hits = self._query(collection, vector, depth, where=where, where_document=_where_document(plan))
            current = self.store.current_generations(name, {h["document_id"] for h in hits})
            stale = {
                h["document_id"]
                for h in hits
                if isinstance(h["document_id"], str) and current.get(h["document_id"]) != h["generation"]
            } - dirty
            if not stale or len(dirty) >= MAX_GUARDED:
                break
            dirty |= set(sorted(stale, key=str)[: MAX_GUARDED - len(dirty)])
        if dirty:
            with self._lock:
                self._dirty.setdefault(name, set()).update(dirty)
        return hits

    def _query(self, collection: Collection, vector: np.ndarray, depth: int, **filters: Any) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "query_embeddings": [vector],
            "n_results": depth,
            "include": ["documents", "metadatas", "distances"],
        }
        kwargs.update({k: v for k, v in filters.items() if v is not None})
        got = self._filtered(lambda: collection.query(**kwargs))
        documents = column(got["documents"], "documents")[0]
        metadatas = column(got["metadatas"], "metadatas")[0]
        distances = column(got["distances"], "distances")[0]
        return [_hit(i, d, m, 1.0 - dist) for i, d, m, dist in zip(got["ids"][0], documents, metadatas, distances)]

    def _filtered(self, operation: Callable[[], T]) -> T:
        """A Chroma read with a where clause; Chroma's own refusal of it (beyond filters.py's checks) says why."""
        try:
            return self.store.connection.call(operation)
        except (ValueError, TypeError) as exc:  # the client library's check of the where clause
            raise AgentloomError(f"filter: Chroma refused it ({first_line(exc)}); {ACCEPTED}") from None
        except Exception as exc:
            if chroma_refused(exc):  # the server's 4xx answer
                raise AgentloomError(f"filter: Chroma refused it ({first_line(exc)}); {ACCEPTED}") from None
            raise

    def _fetch(self, collection: Collection, ids: list[str], vector: np.ndarray) -> list[dict[str, Any]]:
        if not ids:
            return []
        got = self.store.connection.call(
            lambda: collection.get(ids=ids, include=["documents", "metadatas", "embeddings"])
        )
        documents = column(got["documents"], "documents")
        metadatas = column(got["metadatas"], "metadatas")
        embeddings = got["embeddings"]
        if embeddings is None:
            raise AgentloomError("Chroma answered without the embeddings it was asked for; retry, or check the server.")
        return [_hit(i, d, m, float(vector @ e)) for i, d, m, e in zip(got["ids"], documents, metadatas, embeddings)]

    def _current_only(self, collection_name: str, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Drop chunks of superseded or deleted generations (see store.py)."""
        current = self.store.current_generations(collection_name, {h["document_id"] for h in hits})
        return [h for h in hits if current.get(h["document_id"]) == h["generation"]]


def _distinct(hits: list[dict[str, Any]], one_per_document: bool) -> list[dict[str, Any]]:
    """Each text once (the same text stored under two documents is one result), and with
    one_per_document each document's best chunk only."""
    texts: set[str] = set()
    documents: set[str] = set()
    kept = []
    for h in hits:
        text = " ".join(h["text"].split())
        if text in texts or (one_per_document and h["document_id"] in documents):
            continue
        texts.add(text)
        documents.add(h["document_id"])
        kept.append(h)
    return kept


def _is_current(meta: Mapping[str, Any] | None, current: Mapping[str, int]) -> bool:
    return (
        meta is not None
        and meta.get("document_id") in current
        and current[meta["document_id"]] == meta.get("generation")
    )


def _guard(dirty: set[str], current: Mapping[str, int]) -> dict[str, Any] | None:
    """A where clause admitting any chunk of other documents, and only the current generation of these."""
    if not dirty:
        return None
    named = sorted(dirty, key=str)
    terms: list[dict[str, Any]] = [{"document_id": {"$nin": named}}]
    terms += [
        {"$and": [{"document_id": {"$eq": d}}, {"generation": {"$eq": current[d]}}]} for d in named if d in current
    ]
    return terms[0] if len(terms) == 1 else {"$or": terms}


def _where_document(plan: FilterPlan) -> WhereDocument | None:
    return {"$contains": plan.document_contains} if plan.document_contains else None


def _hit(chunk_id: str, text: str, meta: Mapping[str, Any], similarity: float) -> dict[str, Any]:
    meta = dict(meta)
    return {
        "id": chunk_id,
        "chunk_id": chunk_id,
        "document_id": meta.get("document_id"),
        "generation": meta.get("generation"),
        "text": text,
        "metadata": public_metadata(meta),
        "score": round(min(1.0, max(0.0, float(similarity))), 6),
    }


def _empty(collection: str, hybrid: bool, warnings: list[str], message: str | None = None) -> SearchResult:
    return {
        "collection": collection,
        "mode": "hybrid" if hybrid else "vector",
        "results": [],
        "message": message or "no results",
        "warnings": warnings,
    }
