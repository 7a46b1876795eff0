"""Skill search: exact cosine over an in-memory copy of the table, scored against a fixed background.

How a result list is made (``skills_search``):

1. Up to three models embed the request, the last two in worker threads beside the first: the
   **scoring model** (the pack's ``embedding_model``, multilingual-e5-small by default), the **rank
   model** (``rank_model``, use-multilingual-v3) and the **English model** (``english_model``,
   all-MiniLM-L6-v2, the seed's model). The last two are *side models*: each keeps its skill vectors
   in a table of its own.
2. For each model, every skill gets a z: the request's and the skill's cosine with the language
   directions projected out, normalised by what both score against 480 ordinary texts
   (``background.py``). A Chinese request is also read through its glossary translation
   (``embeddings/glossary.py``: 提交 -> commit), and ``BLEND`` of its z is the better of the two. The
   models' z are mixed with the shares of ``ranking.json`` for the request's language (a model that is
   off or failed gives its share to the others); ``mode`` is ``"hybrid"`` when a side model took part,
   ``"vector"`` otherwise.
3. ``LEXICAL`` times the share of the request's glossary terms that a skill's name and description
   name (each term weighted by its rarity among the skills) is added, then
   ``score = 1 / (1 + exp(-(z - CENTER) / SPREAD))``: 0.5 at ``CENTER``, the default threshold. A
   score is a fixed function of z, so it means the same for every request and language, and
   results are sorted by the score they show. The threshold cuts on it.
4. When the scoring model fails, keyword matching answers (``mode "keyword"``, ``fallback`` true).

Why this design, and what each part adds on tuning sets and on held-out sets (MetaTool's held-out
tools, requests written by someone who saw neither this code nor the descriptions): BENCHMARKS.md,
"skills" (``python -m benchmarks skills``).

Speed: a search costs about the slowest model's query embedding; the others run beside it.
LanceDB is read only when the table's version changes; between versions the vectors, their
language-neutral copies and their background statistics sit in numpy matrices.

A new process (``agentloom skills search``) that has not opened the store answers from a copy of what
the last search read, kept beside the store and stamped with the tables' version files (``warm.py``):
the same rows, vectors and ranking, without importing LanceDB.

Each side model's vectors live in their own table (``skills_rank``, ``skills_english``: id, hash,
fingerprint, vector), kept in step with ``skills`` after every scan and before any search that sees a
new table version: rows whose SKILL.md hash or model fingerprint differ are embedded again, rows whose
skill is gone are deleted, and a model of another dimension makes the table anew.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from agentloom.core.errors import AgentloomError
from agentloom.core.work import Cancelled
from agentloom.embeddings.glossary import glossary
from agentloom.packs.skills import warm
from agentloom.packs.skills.background import Background, SkillStats, background, language
from agentloom.packs.skills.keywords import keyword_score
from agentloom.packs.skills.replies import SearchResult, SkillHit
from agentloom.packs.skills.skillfile import embedding_text
from agentloom.packs.skills.table import LanceSearchError, SkillTable, compact_table, ids_in, table_names

if TYPE_CHECKING:  # numpy is imported on first use: the server's start path stays light
    import numpy as np

    from agentloom.embeddings import ModelRecord
    from agentloom.packs.skills.settings import SkillSettings

log = logging.getLogger("agentloom.packs.skills")

RANK_TABLE, ENGLISH_TABLE = "skills_rank", "skills_english"
SNIPPET = 200  # characters of a description in search results (~50 tokens)
BATCH = 64
# The background z at which a score is 0.5 (the default threshold) and how fast the score rises around it:
# chosen between the z of unrelated requests and of the weakest right answers of the tuning set.
CENTER = 1.7
SPREAD = 0.6
# What the glossary adds: a Chinese request's translation as a second query of every model (BLEND of its z is
# the better of the two), and to each z the share of the request's glossary terms a skill names, weighted by
# rarity among the skills.
# benchmarks/skills.py switches each off to measure what it adds.
TRANSLATE = True
BLEND = 0.75
LEXICAL = 0.5
RANK_RETRY_SECONDS = 300.0  # a failed side model is tried again after this long (as the model config cache)
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


def _scores(z: np.ndarray) -> np.ndarray:
    """Background z to the score a user sees and sets thresholds on (0 to 1, 0.5 at ``CENTER``)."""
    import numpy as np

    return np.asarray(1.0 / (1.0 + np.exp(-(z - CENTER) / SPREAD)))


@dataclass(frozen=True)
class Neutral:
    """One model's vectors of a snapshot, language-neutral, with their background statistics."""

    key: tuple[Any, int, str]  # (table object, version, model fingerprint)
    vectors: np.ndarray
    stats: SkillStats


@dataclass(frozen=True)
class Terms:
    """The glossary terms of a snapshot's skills: for each term, the rows that name it."""

    key: tuple[Any, int, str]
    rows: dict[str, tuple[int, ...]]


def _matrix(column: Any, rows: int) -> np.ndarray:
    """A fixed-size-list Arrow column as a (rows, dimensions) float32 matrix, without a Python loop."""
    import numpy as np

    if rows == 0:
        return np.zeros((0, 1), dtype=np.float32)
    flat = column.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(rows, -1)


def _side_schema(dimensions: int) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("hash", pa.string()),
            pa.field("fingerprint", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimensions)),
        ]
    )


@cache
def shares() -> dict[str, dict[str, float]]:
    """Each model's share of a score by request language (``ranking.json``): role -> share."""
    text = resources.files("agentloom.packs.skills").joinpath("ranking.json").read_text(encoding="utf-8")
    data: dict[str, dict[str, float]] = json.loads(text)["shares"]
    return data


@dataclass
class Side:
    """A side model: mixed into every score, its skill vectors in a table of its own.

    Keys are (table object, version, model fingerprint): compared by identity and equality."""

    role: str  # its share's name in ranking.json
    setting: str  # the SkillSettings field that names its model
    table_name: str
    table: Any = None
    failed: str | None = None
    failed_at: float = 0.0
    synced: tuple[Any, int, str] | None = None
    vectors: tuple[tuple[Any, int, str], np.ndarray] | None = None
    written: int = 0  # rows the current scan embedded with this model (write_sides)

    @property
    def label(self) -> str:
        return "rank model" if self.role == "rank" else "English model"

    def key(self, settings: SkillSettings) -> str:
        value: str | None = getattr(settings, self.setting)
        return value or ""


class SkillSearch:
    """The search of one skills table (its in-memory vectors and its side models' tables).

    ``ensure_model`` answers the model in use after re-indexing the table if another model made it
    (the index's scanner does that, under the index's scan lock)."""

    def __init__(self, store: SkillTable, ensure_model: Callable[[], ModelRecord]) -> None:
        self.store = store
        self._ensure_model = ensure_model
        self._lock = threading.RLock()
        self._snapshot: Snapshot | None = None
        self.sides = (Side("rank", "rank_model", RANK_TABLE), Side("english", "english_model", ENGLISH_TABLE))
        self._neutral: dict[str, Neutral] = {}  # by model key: every model in use
        self._snap_terms: Terms | None = None
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

    # -- the side models --------------------------------------------------------------------------
    def side_record(self, side: Side) -> ModelRecord | None:
        """A side model's record, or None when it is off, the scoring model itself, or broken."""
        key = side.key(self.store.settings)
        if side.failed is not None and time.monotonic() - side.failed_at >= RANK_RETRY_SECONDS:
            side.failed = None  # installed or repaired meanwhile? One more try.
        if not key or self._share_setting(side) == 0 or side.failed is not None:
            return None
        try:
            record = self.store.embeddings.model(key)
        except Exception as exc:
            self._give_up(side, exc)
            return None
        if record.key != key:  # the service answers an unknown key with its default model: not what was asked
            self._give_up(side, LookupError(f"no embedding model {key!r} in the registry (got {record.key!r})"))
            return None
        return None if record.key == self.store.model().key else record

    def rank_record(self) -> ModelRecord | None:
        return self.side_record(self.sides[0])

    def _share_setting(self, side: Side) -> float | None:
        """``rank_weight`` when set (the rank model's share in place of ranking.json's), else None."""
        return self.store.settings.rank_weight if side.role == "rank" else None

    def _give_up(self, side: Side, exc: BaseException) -> None:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        side.failed = detail
        side.failed_at = time.monotonic()
        log.warning(
            "skills: %s %r cannot be used (%s): results are ordered without it. "
            "Fix: install it, or set %s to '' in [pack_settings.skills].",
            side.label,
            side.key(self.store.settings),
            detail,
            side.setting,
        )

    def side_state(self, side: Side) -> str:
        """For ``skills status``: whether a side model takes part in scores, and if not, why."""
        if not side.key(self.store.settings) or self._share_setting(side) == 0:
            return "off"
        if side.failed is not None:
            return f"failed ({side.failed}); results are ordered without it until it works again"
        fixed = self._share_setting(side)
        if fixed is not None:
            return f"in use (weight {fixed:g})"
        return "in use (" + ", ".join(f"{lang} {by[side.role]:g}" for lang, by in shares().items()) + ")"

    def rank_state(self) -> str:
        return self.side_state(self.sides[0])

    def _open_side_table(self, side: Side, record: ModelRecord) -> Any:
        db = self.store.db()
        if side.table is None:
            if side.table_name in table_names(db):
                side.table = db.open_table(side.table_name)
            else:  # exist_ok: another process may make it meanwhile
                side.table = db.create_table(side.table_name, schema=_side_schema(record.dimensions), exist_ok=True)
        if side.table.schema.field("vector").type.list_size != record.dimensions:
            # Another model of another size made these vectors: they cannot be updated row by row.
            db.drop_table(side.table_name)
            side.table = db.create_table(side.table_name, schema=_side_schema(record.dimensions))
            log.warning(
                "skills: %s is now %s (%d-d): its table is made anew", side.label, record.key, record.dimensions
            )
        return side.table

    def sync(self) -> None:
        """Bring every side model's table in step with ``skills`` (after a scan; when a search sees a new version)."""
        for side in self.sides:
            self._sync(side)

    def _sync(self, side: Side) -> None:
        record = self.side_record(side)
        if record is None:
            return
        main = self.store.table()
        with self._lock, self.store.guard():
            key = (main, int(main.version), record.fingerprint)
            if _same(side.synced, key):
                return
            rows = self.store.rows()
            table = self._open_side_table(side, record)
            table.checkout_latest()
            have = {
                r["id"]: (r["hash"], r["fingerprint"])
                for r in table.to_arrow().select(["id", "hash", "fingerprint"]).to_pylist()
            }
            todo = [row for name, row in rows.items() if have.get(name) != (row.get("hash"), record.fingerprint)]
            gone = [name for name in have if name not in rows]
            for start in range(0, len(todo), BATCH):
                if not self._upsert(side, record, table, todo[start : start + BATCH]):
                    return
            if gone:
                table.delete(ids_in(gone))
            if (todo or gone) and self.store.settings.compact:
                compact_table(table)
            if todo or gone:
                log.info("skills: %s %s: %d embedded, %d removed", side.label, record.key, len(todo), len(gone))
            side.synced = key

    def _upsert(self, side: Side, record: ModelRecord, table: Any, rows: list[dict[str, Any]]) -> bool:
        """Embed ``rows`` (the skills table's) with a side model and write them to its table; False when the model
        failed (it is given up on, and its table catches up at the next sync)."""
        import pyarrow as pa

        texts = [embedding_text(r["name"], r["description"] or "", list(r.get("tags") or [])) for r in rows]
        try:
            vectors = self.store.embeddings.embed_documents(texts, record.key)
        except Cancelled:
            raise  # the scan was cancelled: not the model's fault
        except Exception as exc:
            self._give_up(side, exc)
            return False
        data = [
            {
                "id": r["name"],
                "hash": r.get("hash") or (r.get("metadata") or {}).get("hash"),
                "fingerprint": record.fingerprint,
                "vector": vectors[i].tolist(),
            }
            for i, r in enumerate(rows)
        ]
        table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            pa.Table.from_pylist(data, schema=table.schema)
        )
        return True

    def prepare_sides(self) -> None:
        """Before a scan embeds: load every model and its background (first use only), so nothing of that is
        left for after the scan's last count. A side model that fails is given up on."""
        self._background(self.store.model())
        for side in self.sides:
            side.written = 0
            record = self.side_record(side)
            if record is not None:
                try:
                    self.store.embeddings.prepare(record.key)
                    self._background(record)
                except Exception as exc:
                    self._give_up(side, exc)

    def write_sides(self, rows: list[dict[str, Any]]) -> None:
        """A batch the scan just wrote to the skills table, embedded and written by every side model. A table
        that cannot be written never fails the scan: the sync after it says so and the next search retries."""
        for side in self.sides:
            record = self.side_record(side)
            if record is not None:
                try:
                    with self._lock, self.store.guard():
                        table = self._open_side_table(side, record)
                        table.checkout_latest()
                        have = {
                            r["id"]: (r["hash"], r["fingerprint"])
                            for r in table.to_arrow().select(["id", "hash", "fingerprint"]).to_pylist()
                        }
                        todo = [
                            r
                            for r in rows
                            if have.get(r["name"]) != ((r.get("metadata") or {}).get("hash"), record.fingerprint)
                        ]
                        if todo and self._upsert(side, record, table, todo):
                            side.written += len(todo)
                except Cancelled:
                    raise
                except Exception as exc:
                    log.debug("skills: %s table not written during the scan (%s)", side.label, exc)

    def after_scan(self, embedded: bool = False) -> None:
        """``sync`` after a scan; after one that ``embedded`` skills (its models are loaded by now), every model's
        background too, so the next search does not wait for them. A scan that changed nothing loads no model:
        the server's start stays light, and the first search makes what it needs. A failure is logged, never
        fails the scan (the next search tries again)."""
        try:
            for side in self.sides:
                if side.written and side.table is not None:
                    log.info("skills: %s: %d embedded during the scan", side.label, side.written)
                    if self.store.settings.compact:
                        compact_table(side.table)
                side.written = 0
            self.sync()
            records = [self.store.model(), *(self.side_record(side) for side in self.sides)] if embedded else []
            for record in records:
                if record is not None:
                    self._background(record)
        except Exception as exc:
            log.warning("skills: side model tables not updated after the scan (%s); the next search retries", exc)

    def _side_matrix(self, side: Side, snap: Snapshot, record: ModelRecord) -> np.ndarray | None:
        """A side model's vectors in the snapshot's row order (None when they cannot be had)."""
        import numpy as np

        key = (snap.table, snap.version, record.fingerprint)
        cached = side.vectors
        if cached is not None and _same(cached[0], key):
            return cached[1]
        self._sync(side)
        if side.failed is not None:
            return None
        with self._lock, self.store.guard():
            data = side.table.to_arrow()
            ids = data.column("id").to_pylist()
            vectors = _matrix(data.column("vector"), data.num_rows)
            where = {name: i for i, name in enumerate(ids)}
            # A skill without a vector here (written after the sync) gets zeros: the other models rank it.
            matrix = np.zeros((len(snap.names), record.dimensions), dtype=np.float32)
            for row, name in enumerate(snap.names):
                if name in where:
                    matrix[row] = vectors[where[name]]
            side.vectors = (key, matrix)
            return matrix

    def _start_side_queries(self, texts: list[str]) -> list[tuple[Side, ModelRecord, Future[list[np.ndarray]]]]:
        """Each side model embeds the request (and its translation) in a worker thread while the scoring model
        does (ctypes and numpy release the GIL): the search then costs about the slowest model, not the sum."""
        embed = self.store.embeddings.embed_query

        def run(key: str) -> list[np.ndarray]:
            return [embed(text, key) for text in texts]

        pending = []
        for side in self.sides:
            record = self.side_record(side)
            if record is not None:
                pending.append((side, record, _pool().submit(run, record.key)))
        return pending

    def _background(self, record: ModelRecord) -> Background:
        return background(self.store.embeddings, record, self.store.embeddings.settings.cache_dir)

    def _zscores(
        self, snap: Snapshot, record: ModelRecord, vectors: np.ndarray, request: np.ndarray, lang: str
    ) -> np.ndarray:
        """Every skill's background z for ``request`` under one model (``vectors``: that model's rows)."""
        bg = self._background(record)
        key = (snap.table, snap.version, record.fingerprint)
        made = self._neutral.get(record.key)
        if made is None or not _same(made.key, key):
            neutral = bg.neutral(vectors)
            made = Neutral(key=key, vectors=neutral, stats=bg.skill_stats(neutral))
            self._neutral[record.key] = made
        return bg.zscores(made.vectors, made.stats, bg.neutral(request), lang)

    def _request_zscores(
        self, snap: Snapshot, record: ModelRecord, vectors: np.ndarray, embedded: list[np.ndarray], lang: str
    ) -> np.ndarray:
        """The request's z under one model; with a translation (``embedded[1]``), ``BLEND`` of it is the better of
        the two: a word the model does not align across languages counts through its translation."""
        import numpy as np

        z = self._zscores(snap, record, vectors, embedded[0], lang)
        if len(embedded) > 1:
            z = (1 - BLEND) * z + BLEND * np.maximum(z, self._zscores(snap, record, vectors, embedded[1], "en"))
        return z

    def _side_zscores(
        self, pending: list[tuple[Side, ModelRecord, Future[list[np.ndarray]]]], snap: Snapshot, lang: str
    ) -> dict[str, np.ndarray]:
        """Each side model's z for every skill, by role (a model that failed is left out)."""
        out = {}
        for side, record, future in pending:
            try:
                matrix = self._side_matrix(side, snap, record)
                if matrix is not None:
                    out[side.role] = self._request_zscores(snap, record, matrix, future.result(), lang)
            except Exception as exc:
                self._give_up(side, exc)
        return out

    def _mixed(self, z: dict[str, np.ndarray], lang: str) -> np.ndarray:
        """The models' z mixed by their shares for ``lang``, rescaled over the models that answered."""
        by_role = dict(shares().get(lang, shares()["en"]))
        fixed = self.store.settings.rank_weight
        if fixed is not None:
            others = sum(v for role, v in by_role.items() if role != "rank")
            by_role = {role: fixed if role == "rank" else (1 - fixed) * v / others for role, v in by_role.items()}
        import numpy as np

        total = sum(by_role[role] for role in z)
        weights = [by_role[role] / total if total > 0 else 1 / len(z) for role in z]  # no share at all: alike
        return np.asarray(np.average(np.stack(list(z.values())), axis=0, weights=weights))

    def _lexical(self, snap: Snapshot, query: str) -> np.ndarray:
        """Per skill, the share of the request's glossary terms (either language) its name and description name,
        each term weighted by its rarity among the skills (idf): 0 when the request names none."""
        import numpy as np

        terms = self._terms(snap)
        wanted = glossary().terms(query)
        share = np.zeros(len(snap.names))
        if not wanted:
            return share
        total = 0.0
        for term in wanted:
            rows = terms.rows.get(term, ())
            weight = float(np.log1p(len(snap.names) / (1 + len(rows))))
            total += weight
            share[list(rows)] += weight
        return share / total

    def _terms(self, snap: Snapshot) -> Terms:
        made = self._snap_terms
        if made is None or not _same(made.key, (snap.table, snap.version, "")):
            rows: dict[str, list[int]] = {}
            for row, (name, description) in enumerate(zip(snap.names, snap.descriptions, strict=True)):
                for term in glossary().terms(f"{name.replace('-', ' ')} {description}"):
                    rows.setdefault(term, []).append(row)
            made = Terms(key=(snap.table, snap.version, ""), rows={t: tuple(r) for t, r in rows.items()})
            self._snap_terms = made
        return made

    # -- searching --------------------------------------------------------------------------------
    def search(self, query: str, limit: int = 5, threshold: float | None = None) -> SearchResult:
        if not isinstance(query, str) or not query.strip():
            raise AgentloomError("query: it is empty; describe the task, e.g. 'commit my changes' or '帮我提交代码'.")
        if limit < 1 or limit > 100:
            raise AgentloomError(f"limit: {limit} is out of range; use 1 to 100.")
        if threshold is not None and not 0 <= threshold <= 1:
            raise AgentloomError(f"threshold: {threshold} is out of range; use a score from 0 to 1 (default 0.5).")
        query = query.strip()
        store = self.store
        copy, before = self._warm()
        if copy is None:
            store.table()
        try:
            record = self._ensure_model() if copy is None else store.model()
            lang = language(query)
            translation = glossary().translate(query) if lang == "zh" and TRANSLATE else None
            texts = [query] if translation is None else [query, translation]
            pending = self._start_side_queries(texts)
            embedded = [store.embeddings.embed_query(text, record.key) for text in texts]
            cut = store.default_threshold() if threshold is None else threshold
            snap = self.snapshot() if copy is None else copy
            z = self._request_zscores(snap, record, snap.vectors, embedded, lang) if snap.names else None
        except LanceSearchError:
            raise
        except Exception as exc:
            return self._keyword_search(query, limit, exc)
        import numpy as np

        results: list[SkillHit] = []
        mode: Literal["vector", "hybrid"] = "vector"
        if z is not None:
            sides = self._side_zscores(pending, snap, lang)
            if sides:
                z, mode = self._mixed({"scoring": z, **sides}, lang), "hybrid"
            scores = _scores(z + LEXICAL * self._lexical(snap, query))
            for row in np.argsort(-scores, kind="stable"):
                score = round(float(scores[row]), 4)
                if not score >= cut:  # NaN too: a stored vector with a null in it (written by another tool)
                    break  # sorted: nothing after it passes either
                results.append(_hit(snap.names[row], snap.descriptions[row], score, snap.paths[row]))
                if len(results) == limit:
                    break
        if before is not None and copy is None:
            self._save_warm(before, record, snap)
        notes = [m for m in (store.status_message(),) if m]
        if not results:
            notes.append(
                f"no skill scored {cut:g} or more (model {record.key}); lower threshold or rephrase"
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
        its side models' vectors are put where ``_side_matrix`` finds them. A stamp with no copy is returned so
        the search that reads the store can write one."""
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
            sides = {side.role: (side, self.side_record(side)) for side in self.sides}
        except Exception:
            return None, current
        if copy.model != (record.key, record.fingerprint):
            return None, current
        in_use = {role: (r.key, r.fingerprint) for role, (side, r) in sides.items() if r is not None}
        if copy.sides != in_use:
            return None, current
        with self._lock:
            for role, (side, r) in sides.items():
                if r is not None:
                    side.vectors = ((snap.table, snap.version, r.fingerprint), copy.side_vectors[role])
        return snap, current

    def _save_warm(self, before: list[list[Any]], record: ModelRecord, snap: Snapshot) -> None:
        """Write the copy of what this search read, if nothing wrote to the store meanwhile."""
        if warm.stamp(self.store.path) != before:
            return
        models: dict[str, tuple[str, str]] = {}
        vectors: dict[str, np.ndarray] = {}
        for side in self.sides:
            r = self.side_record(side)
            if r is None:
                continue
            cached = side.vectors
            if cached is None or not _same(cached[0], (snap.table, snap.version, r.fingerprint)):
                return  # this model's vectors were not read (one skill): no copy this time
            models[side.role] = (r.key, r.fingerprint)
            vectors[side.role] = cached[1]
        warm.save(
            self.store.path,
            warm.Warm(
                stamp=before,
                model=(record.key, record.fingerprint),
                sides=models,
                names=snap.names,
                descriptions=snap.descriptions,
                paths=snap.paths,
                vectors=snap.vectors,
                side_vectors=vectors,
            ),
        )

    def _keyword_search(self, query: str, limit: int, exc: BaseException) -> SearchResult:
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


def _hit(name: str, description: str, score: float, path: str | None) -> SkillHit:
    if len(description) > SNIPPET:
        description = description[: SNIPPET - 1].rstrip() + "…"
    return {"name": name, "description": description, "score": score, "path": path or ""}
