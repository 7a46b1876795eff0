"""The skill index: a LanceDB table of skills, kept in step with the skill folders on disk.

``<data_dir>/skills/skills.lance`` holds two tables: ``skills`` (id, name, description, tags,
vector, metadata{path, size, hash, indexedAt, model}) and ``skills_model`` (the one model
that made every vector of ``skills``: key, fingerprint, dimensions). When the model in use
changes, ``skills`` is rebuilt with the new model: vectors of two models never mix.
Scanning the roots (what counts as unchanged, new, changed or gone) lives in ``scan.py``.
"""

from __future__ import annotations

import datetime
import difflib
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError, DependencyUnavailable, NotFoundError
from agentloom.core.timestamps import iso
from agentloom.packs.skills.scan import Progress, Scanner, ids_in, now_ms
from agentloom.packs.skills.search import SkillSearch
from agentloom.packs.skills.settings import FOLLOW_DEFAULT, SkillSettings, default_roots
from agentloom.packs.skills.skillfile import MARKER, SKILL_FILE, SkillFormatError, parse_skill

if TYPE_CHECKING:
    from agentloom.embeddings import EmbeddingService, ModelRecord

log = logging.getLogger("agentloom.packs.skills")

TABLE = "skills"
MODEL_TABLE = "skills_model"
FALLBACK_THRESHOLD = 0.0


class LanceSearchError(DependencyUnavailable):
    """The LanceDB store cannot be opened or read."""

    code = "LANCE_SEARCH_ERROR"


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


class SkillIndex:
    @classmethod
    def open(cls, folder: Path, embeddings: EmbeddingService, settings: SkillSettings) -> SkillIndex:
        """The index in the pack's folder over the configured roots (or the defaults): for setup and the CLI."""
        roots = [Path(r).expanduser() for r in settings.roots] if settings.roots is not None else default_roots(folder)
        return cls(folder / "skills.lance", roots, embeddings, settings)

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
        self._scanner = Scanner(self)  # scan.py: the scanning rule and its code
        self.searcher = SkillSearch(self)  # search.py: ranking, scores and the second model's table
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
        except Exception as exc:
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
                if TABLE in table_names(db):
                    table = db.open_table(TABLE)
                    log.info(
                        "LanceDB opened existing skills table (%d rows) in %.0f ms",
                        table.count_rows(),
                        (time.perf_counter() - started) * 1000,
                    )
                else:
                    record = self.model()
                    table = db.create_table(TABLE, schema=_schema(record.dimensions))
                    self._write_model(db, record)
                    log.info("LanceDB initialized with skills table (%s)", self.path)
                self._db, self._table = db, table
            return table

    def _write_model(self, db: Any, record: ModelRecord) -> None:
        import pyarrow as pa

        row = {
            "key": record.key,
            "fingerprint": record.fingerprint,
            "dimensions": record.dimensions,
            "created_at": now_ms(),
        }
        data = pa.Table.from_pylist([row])
        if MODEL_TABLE in table_names(db):
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
        """The model skills use now (a built-in one, such as multilingual-e5-small, is registered on first use)."""
        key = self.settings.embedding_model
        return self.embeddings.model(None if key == FOLLOW_DEFAULT else key)

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
        log.warning(
            "skills: the embedding model changed (%s -> %s): re-indexing every skill",
            (made or {}).get("key"),
            record.key,
        )

    def ensure_model(self) -> ModelRecord:
        """The model in use, with the table rebuilt and re-indexed when it was made by another one."""
        record = self.model()
        if self._current(record):
            return record
        with self._scan_lock:
            record = self.model()
            if not self._current(record):
                self._rebuild(record)
                self._scanner.run(record, None, None)
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
            except Exception as exc:
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
                counts = self._scanner.run(record, path, progress)
            finally:
                self.scanning = False
        self.searcher.after_scan()  # the second model's vectors follow the table now, not at the next search
        return counts

    # -- reading -----------------------------------------------------------------------------------
    def _status_message(self) -> str | None:
        if self.scanning:
            done, total = self.scan_progress
            return f"indexing in progress ({done} of {total} skill folders done): results come from the skills indexed so far"
        return None

    def search(self, query: str, limit: int = 5, threshold: float | None = None) -> dict[str, Any]:
        """Best skills first; each score is the scoring model's cosine (search.py explains the ranking)."""
        return self.searcher.search(query, limit, threshold)

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
            str(p.relative_to(folder))
            for p in folder.rglob("*")
            if p.is_file() and p.name not in (MARKER, f"{MARKER}.tmp")
        )
        return {
            "name": skill.name,
            "description": skill.description,
            "tags": skill.tags,
            "path": str(folder),
            "body": skill.body,
            "files": files,
            **({"metadata": _jsonable(skill.extra)} if skill.extra else {}),
        }

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
            self.table().delete(ids_in([name]))
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
            "rank_model": self.settings.rank_model or None,
            "rank_model_state": self.searcher.rank_state(),
            "version": int(self.table().version),
            "scanning": self.scanning,
            "last_scan": self.last_scan,
        }


def table_names(db: Any) -> set[str]:
    """The tables of a LanceDB connection (list_tables answers an object with .tables in 0.40)."""
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
