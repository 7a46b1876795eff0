"""Skill search: exact cosine top-k over an in-memory copy of the table, re-ordered by a second model.

How a result list is made (``skills_search``):

1. The **scoring model** (the pack's ``embedding_model``, multilingual-e5-small by default) embeds
   the request; each skill's ``score`` is that model's cosine similarity with the skill's vector,
   clipped to [0, 1]. The threshold (the model record's ``default_threshold`` unless given) applies
   to this score and only to it.
2. The **rank model** (``rank_model``, use-multilingual-v3 by default) embeds the request too. Each
   model's cosines are standardised over the whole index (z-scores: the two models' raw cosines
   live on different scales: e5 puts unrelated text near 0.8, USE near 0.1) and mixed,
   ``(1 - w) * z(scoring) + w * z(rank)`` with ``w = rank_weight`` (0.4). That mix only orders the
   skills that passed the threshold; it is never reported, so a score is always an honest cosine.
   The reply's ``mode`` is ``"hybrid"``; ``"vector"`` when the rank model is off or failed.
3. When the scoring model fails, keyword matching answers (``mode "keyword"``, ``fallback`` true).

Why this mix (``python -m benchmarks skills``; paraphrased requests over 51 real skills, top-1 on
the first 32 English + 32 Chinese, where the weight was chosen): e5 alone EN 88% / ZH 53%; USE
alone 88% / 72%; rank fusion (RRF) of both 94% / 84%; z-score mix 0.6 e5 + 0.4 USE 94% / 91%.
On 8 + 8 requests added afterwards (held out) the mix gets 4/8 / 6/8; over all 40 + 40, 85% / 88%.
LanceDB full-text search (``FTS(base_tokenizer="icu")`` on name, description and tags) fused by
RRF lowered every combination (e.g. e5+USE+FTS 81% / 75% on the first set) and added nothing when
mixed in by score, so it is not used. USE alone cannot score: its cosine for 帮我提交代码 →
git-commit is 0.11, where the seed asks for more than 0.75.

Speed (``python -m benchmarks skills``: 1,000 skills, 2 cores, uncached queries): a search costs
about e5's query embedding (onnxruntime, p50 5.7 ms); USE (2-3 ms) runs beside it in a worker
thread. LanceDB is read only when the table's version changes; between versions the vectors sit
in numpy matrices and the whole ranking costs about 1 ms (einsum, see ``_cosines``). Measured:
search p50 9.3 ms, p95 12.4 ms (goal 20 ms); with another process keeping one core busy, p95 25 ms.

A new process (``agentloom skills search``) that has not opened the store answers from a copy of what
the last search read, kept beside the store and stamped with the tables' version files (``warm.py``):
the same rows, vectors and ranking, without importing LanceDB (~2 s of CPU on 2 cores).

The rank model's vectors live in their own table, ``skills_rank`` (id, hash, fingerprint, vector),
kept in step with ``skills`` after every scan and before any search that sees a new table version:
rows whose SKILL.md hash or model fingerprint differ are embedded again, rows whose skill is gone
are deleted, and a model of another dimension makes the table anew.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError
from agentloom.packs.skills import warm
from agentloom.packs.skills.keywords import keyword_score
from agentloom.packs.skills.skillfile import embedding_text
from agentloom.packs.skills.table import LanceSearchError, SkillTable, compact_table, ids_in, table_names

if TYPE_CHECKING:  # numpy is imported on first use: the server's start path stays light
    import numpy as np

    from agentloom.embeddings import ModelRecord

log = logging.getLogger("agentloom.packs.skills")

RANK_TABLE = "skills_rank"
SNIPPET = 200  # characters of a description in search results (~50 tokens)
BATCH = 64
RANK_RETRY_SECONDS = 300.0  # a failed rank model is tried again after this long (as the model config cache)
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="skills-rank")
        return _POOL


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there, so a query handed to that pool would
    wait forever; the child makes its own pool on first use."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


@dataclass(frozen=True)
class Snapshot:
    """One version of the ``skills`` table in memory: rows in a fixed order and their vectors."""

    table: Any  # the table object read: a model switch makes a new table whose versions start again
    version: int
    names: list[str]
    descriptions: list[str]
    paths: list[str]
    vectors: np.ndarray  # (rows, dimensions), L2-normalised


def _same(key: tuple[Any, int, str] | None, other: tuple[Any, int, str]) -> bool:
    return key is not None and key[0] is other[0] and key[1:] == other[1:]


def _cosines(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Dot products of every row with ``vector`` (cosines: both sides are L2-normalised).

    einsum, not ``matrix @ vector``: the BLAS product wakes OpenBLAS's thread pool, and on a loaded
    2-core machine that costs up to 13 ms now and then (measured: matmul p50 0.03 ms, max 13 ms;
    einsum p50 0.11 ms, max 0.22 ms at 1,000 x 512), which is the p95 of a whole search.
    """
    import numpy as np

    return np.einsum("ij,j->i", matrix, vector)


def _zscores(cosines: np.ndarray) -> np.ndarray:
    import numpy as np

    spread = float(cosines.std())
    if spread < 1e-9:  # one skill, or all alike: this model cannot tell them apart
        return np.zeros_like(cosines)
    return (cosines - float(cosines.mean())) / spread


def _matrix(column: Any, rows: int) -> np.ndarray:
    """A fixed-size-list Arrow column as a (rows, dimensions) float32 matrix, without a Python loop."""
    import numpy as np

    if rows == 0:
        return np.zeros((0, 1), dtype=np.float32)
    flat = column.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(rows, -1)


def _rank_schema(dimensions: int) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("hash", pa.string()),
            pa.field("fingerprint", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimensions)),
        ]
    )


class SkillSearch:
    """The search of one skills table (its in-memory vectors and its rank model's table).

    ``ensure_model`` answers the model in use after re-indexing the table if another model made it
    (the index's scanner does that, under the index's scan lock)."""

    def __init__(self, store: SkillTable, ensure_model: Callable[[], ModelRecord]) -> None:
        self.store = store
        self._ensure_model = ensure_model
        self._lock = threading.RLock()
        self._snapshot: Snapshot | None = None
        # Keys are (table object, version, rank model fingerprint): compared by identity and equality.
        self._rank_vectors: tuple[tuple[Any, int, str], np.ndarray] | None = None
        self._synced: tuple[Any, int, str] | None = None
        self._rank_table: Any = None
        self._rank_failed: str | None = None
        self._rank_failed_at = 0.0
        self._fallback_told = False
        self._warm_memo: tuple[warm.Warm, Snapshot] | None = None

    # -- the scoring model's vectors -------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The table in memory, read again only when its version changed (a scan, a removal)."""
        table = self.store.table()
        with self.store.guard():
            version = int(table.version)
            current = self._snapshot
            if current is not None and current.table is table and current.version == version:
                return current
            with self._lock:
                try:
                    data = table.to_arrow()
                except Exception:
                    table.checkout_latest()
                    version = int(table.version)
                    data = table.to_arrow()
                meta = data.column("metadata").to_pylist()
                snap = Snapshot(
                    table=table,
                    version=version,
                    names=data.column("name").to_pylist(),
                    descriptions=[d or "" for d in data.column("description").to_pylist()],
                    paths=[(m or {}).get("path") or "" for m in meta],
                    vectors=_matrix(data.column("vector"), data.num_rows),
                )
                self._snapshot = snap
                return snap

    # -- the rank model ------------------------------------------------------------------------
    def rank_record(self) -> ModelRecord | None:
        """The second model, or None when it is off, the same as the scoring model, or broken."""
        settings = self.store.settings
        key = settings.rank_model
        if self._rank_failed is not None and time.monotonic() - self._rank_failed_at >= RANK_RETRY_SECONDS:
            self._rank_failed = None  # installed or repaired meanwhile? One more try.
        if not key or settings.rank_weight <= 0 or self._rank_failed is not None:
            return None
        try:
            record = self.store.embeddings.model(key)
        except Exception as exc:
            self._give_up_rank(exc)
            return None
        if record.key != key:  # the service answers an unknown key with its default model: not what was asked
            self._give_up_rank(LookupError(f"no embedding model {key!r} in the registry (got {record.key!r})"))
            return None
        return None if record.key == self.store.model().key else record

    def _give_up_rank(self, exc: BaseException) -> None:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        self._rank_failed = detail
        self._rank_failed_at = time.monotonic()
        log.warning(
            "skills: rank model %r cannot be used (%s): results are ordered by the scoring model alone. "
            "Fix: install it, or set rank_model to '' in [pack_settings.skills].",
            self.store.settings.rank_model,
            detail,
        )

    def rank_state(self) -> str:
        """For ``skills status``: whether the rank model orders results, and if not, why."""
        settings = self.store.settings
        if not settings.rank_model or settings.rank_weight <= 0:
            return "off"
        if self._rank_failed is not None:
            return f"failed ({self._rank_failed}); results are ordered by the scoring model until it works again"
        return f"in use (weight {settings.rank_weight:g})"

    def _open_rank_table(self, record: ModelRecord) -> Any:
        db = self.store.db()
        if self._rank_table is None:
            if RANK_TABLE in table_names(db):
                self._rank_table = db.open_table(RANK_TABLE)
            else:
                self._rank_table = db.create_table(RANK_TABLE, schema=_rank_schema(record.dimensions))
        if self._rank_table.schema.field("vector").type.list_size != record.dimensions:
            # Another model of another size made these vectors: they cannot be updated row by row.
            db.drop_table(RANK_TABLE)
            self._rank_table = db.create_table(RANK_TABLE, schema=_rank_schema(record.dimensions))
            log.warning("skills: rank model is now %s (%d-d): its table is made anew", record.key, record.dimensions)
        return self._rank_table

    def sync(self) -> None:
        """Bring ``skills_rank`` in step with ``skills`` (called after a scan and when a search sees a new version)."""
        record = self.rank_record()
        if record is None:
            return
        main = self.store.table()
        with self._lock, self.store.guard():
            key = (main, int(main.version), record.fingerprint)
            if _same(self._synced, key):
                return
            rows = self.store.rows()
            table = self._open_rank_table(record)
            table.checkout_latest()
            have = {
                r["id"]: (r["hash"], r["fingerprint"])
                for r in table.to_arrow().select(["id", "hash", "fingerprint"]).to_pylist()
            }
            todo = [row for name, row in rows.items() if have.get(name) != (row.get("hash"), record.fingerprint)]
            gone = [name for name in have if name not in rows]
            for start in range(0, len(todo), BATCH):
                batch = todo[start : start + BATCH]
                texts = [embedding_text(r["name"], r["description"] or "", list(r.get("tags") or [])) for r in batch]
                try:
                    vectors = self.store.embeddings.embed_documents(texts, record.key)
                except Exception as exc:
                    self._give_up_rank(exc)
                    return
                import pyarrow as pa

                data = [
                    {
                        "id": r["name"],
                        "hash": r.get("hash"),
                        "fingerprint": record.fingerprint,
                        "vector": vectors[i].tolist(),
                    }
                    for i, r in enumerate(batch)
                ]
                table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
                    pa.Table.from_pylist(data, schema=table.schema)
                )
            if gone:
                table.delete(ids_in(gone))
            if (todo or gone) and self.store.settings.compact:
                compact_table(table)
            if todo or gone:
                log.info("skills: rank model %s: %d embedded, %d removed", record.key, len(todo), len(gone))
            self._synced = key

    def after_scan(self) -> None:
        """``sync`` after a scan; a failure is logged, never fails the scan (the next search tries again)."""
        try:
            self.sync()
        except Exception as exc:
            log.warning("skills: rank model table not updated after the scan (%s); the next search retries", exc)

    def _rank_matrix(self, snap: Snapshot, record: ModelRecord) -> np.ndarray | None:
        """The rank model's vectors in the snapshot's row order (None when they cannot be had)."""
        import numpy as np

        key = (snap.table, snap.version, record.fingerprint)
        cached = self._rank_vectors
        if cached is not None and _same(cached[0], key):
            return cached[1]
        self.sync()
        if self._rank_failed is not None:
            return None
        with self._lock, self.store.guard():
            data = self._rank_table.to_arrow()
            ids = data.column("id").to_pylist()
            vectors = _matrix(data.column("vector"), data.num_rows)
            where = {name: i for i, name in enumerate(ids)}
            # A skill without a rank vector (written after the sync) gets zeros: it ranks by the scoring model.
            matrix = np.zeros((len(snap.names), record.dimensions), dtype=np.float32)
            for row, name in enumerate(snap.names):
                if name in where:
                    matrix[row] = vectors[where[name]]
            self._rank_vectors = (key, matrix)
            return matrix

    def _start_rank_query(self, query: str) -> tuple[ModelRecord, Future[np.ndarray]] | None:
        """The rank model embeds the request in a worker thread while the scoring model does (ctypes and
        numpy release the GIL): the search then costs about the slower model, not the sum."""
        record = self.rank_record()
        if record is None:
            return None
        return record, _pool().submit(self.store.embeddings.embed_query, query, record.key)

    def _order(
        self, pending: tuple[ModelRecord, Future[np.ndarray]] | None, cosines: np.ndarray, snap: Snapshot
    ) -> tuple[np.ndarray, str]:
        """Row indices best first, and the mode: "hybrid" (both models) or "vector" (the scoring model alone)."""
        import numpy as np

        fused = None
        if pending is not None and len(snap.names) > 1:
            record, future = pending
            try:
                matrix = self._rank_matrix(snap, record)
                if matrix is not None:
                    other = _cosines(matrix, future.result())
                    weight = self.store.settings.rank_weight
                    fused = (1 - weight) * _zscores(cosines) + weight * _zscores(other)
            except Exception as exc:
                self._give_up_rank(exc)
        if fused is None:
            return np.argsort(-cosines, kind="stable"), "vector"
        return np.argsort(-fused, kind="stable"), "hybrid"

    # -- searching --------------------------------------------------------------------------------
    def search(self, query: str, limit: int = 5, threshold: float | None = None) -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise AgentloomError("query: it is empty; describe the task, e.g. 'commit my changes' or '帮我提交代码'.")
        if limit < 1 or limit > 100:
            raise AgentloomError(f"limit: {limit} is out of range; use 1 to 100.")
        if threshold is not None and not 0 <= threshold <= 1:
            raise AgentloomError(f"threshold: {threshold} is out of range; use a cosine similarity from 0 to 1.")
        query = query.strip()
        store = self.store
        copy, before = self._warm()
        if copy is None:
            store.table()
        try:
            record = self._ensure_model() if copy is None else store.model()
            pending = self._start_rank_query(query)
            vector = store.embeddings.embed_query(query, record.key)
        except LanceSearchError:
            raise
        except Exception as exc:
            return self._keyword_search(query, limit, exc)
        import numpy as np

        cut = store.default_threshold(record) if threshold is None else threshold
        snap = self.snapshot() if copy is None else copy
        results = []
        mode = "vector"
        if snap.names:
            cosines = np.clip(_cosines(snap.vectors, vector), 0.0, 1.0)
            order, mode = self._order(pending, cosines, snap)
            for row in order:
                score = round(float(cosines[row]), 4)
                if (
                    not score >= cut
                ):  # NaN too: a stored vector with a null in it (written by another tool) scores nothing
                    continue  # the threshold belongs to the scoring model's cosine, whatever the order
                results.append(_hit(snap.names[row], snap.descriptions[row], score, snap.paths[row]))
                if len(results) == limit:
                    break
        if before is not None and copy is None:
            self._save_warm(before, record, snap)
        notes = [m for m in (store.status_message(),) if m]
        if not results:
            notes.append(
                f"no skill scored {cut:g} or more (cosine, model {record.key}); lower threshold or rephrase"
                if snap.names
                else "no skills are indexed yet; put skill folders in a root and run skills_index"
            )
        return {
            "results": results,
            "message": "; ".join(notes) or None,
            "mode": mode,
            "fallback": False,
            "model": record.key,
            "threshold": cut,
        }

    # -- the copy beside the store (warm.py): a new process searches without LanceDB ----------------
    def _warm(self) -> tuple[Snapshot | None, list[list[Any]] | None]:
        """(a snapshot from the copy, or None; the store's stamp) while this process has not opened the store.

        The copy serves only when it was made at the store's current stamp by the models configured now;
        its rank vectors are put where ``_rank_matrix`` finds them. A stamp with no copy is returned so the
        search that reads the store can write one."""
        store = self.store
        if store.opened or store.scanning:
            return None, None
        current = warm.stamp(store.path)
        memo = self._warm_memo
        if memo is not None and memo[0].stamp == current:
            copy, snap = memo
        else:
            loaded = warm.load(store.path, current)
            if loaded is None:
                return None, current
            copy = loaded
            snap = Snapshot(
                table=object(),
                version=-1,
                names=copy.names,
                descriptions=copy.descriptions,
                paths=copy.paths,
                vectors=copy.vectors,
            )  # no LanceDB table is ever this object
            self._warm_memo = (copy, snap)
        try:
            record = store.model()
            rank = self.rank_record()
        except Exception:
            return None, current
        if copy.model != (record.key, record.fingerprint):
            return None, current
        if copy.rank_model != (None if rank is None else (rank.key, rank.fingerprint)):
            return None, current
        if rank is not None and copy.rank_vectors is not None:  # a copy with a rank model has its vectors
            with self._lock:
                self._rank_vectors = ((snap.table, snap.version, rank.fingerprint), copy.rank_vectors)
        return snap, current

    def _save_warm(self, before: list[list[Any]], record: ModelRecord, snap: Snapshot) -> None:
        """Write the copy of what this search read, if nothing wrote to the store meanwhile."""
        if warm.stamp(self.store.path) != before:
            return
        rank = self.rank_record()
        rank_vectors = None
        if rank is not None:
            cached = self._rank_vectors
            if cached is None or not _same(cached[0], (snap.table, snap.version, rank.fingerprint)):
                return  # the rank model's vectors were not read (one skill): no copy this time
            rank_vectors = cached[1]
        warm.save(
            self.store.path,
            warm.Warm(
                stamp=before,
                model=(record.key, record.fingerprint),
                rank_model=None if rank is None else (rank.key, rank.fingerprint),
                names=snap.names,
                descriptions=snap.descriptions,
                paths=snap.paths,
                vectors=snap.vectors,
                rank_vectors=rank_vectors,
            ),
        )

    def _keyword_search(self, query: str, limit: int, exc: BaseException) -> dict[str, Any]:
        if not self._fallback_told:
            self._fallback_told = True
            log.warning("skills: embedding model failed (%s): answering by keyword matching", exc)
        scored = []
        for row in self.store.rows().values():
            score = keyword_score(query, row["name"], row["description"] or "", list(row.get("tags") or []))
            if score > 0:
                scored.append((score, row))
        scored.sort(key=lambda item: (-item[0], item[1]["name"]))
        results = [_hit(r["name"], r["description"] or "", s, r.get("path")) for s, r in scored[:limit]]
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        notes = [
            f"fallback: the embedding model failed ({detail}); results come from keyword matching on name, "
            "description and tags, and scores are the share of query terms found, not cosine similarities"
        ]
        if msg := self.store.status_message():
            notes.append(msg)
        return {
            "results": results,
            "message": "; ".join(notes),
            "mode": "keyword",
            "fallback": True,
            "model": None,
            "threshold": None,
        }


def _hit(name: str, description: str, score: float, path: str | None) -> dict[str, Any]:
    if len(description) > SNIPPET:
        description = description[: SNIPPET - 1].rstrip() + "…"
    return {"name": name, "description": description, "score": score, "path": path or ""}
