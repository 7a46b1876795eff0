"""The skills table: the LanceDB folder the scanner writes and the searcher reads.

``<data_dir>/skills/skills.lance`` holds two tables: ``skills`` (id, name, description, tags,
vector, metadata{path, size, hash, indexedAt, model}) and ``skills_model`` (the one model
that made every vector of ``skills``: key, fingerprint, dimensions). When the model in use
changes, ``skills`` is rebuilt with the new model: vectors of two models never mix.

:class:`SkillTable` is the one object ``scan.py`` and ``search.py`` share: the connection, the
rows read at the table's current version, the model record, and the state of a running scan.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError, DependencyUnavailable
from agentloom.packs.skills.settings import FOLLOW_DEFAULT, SkillSettings

if TYPE_CHECKING:
    from agentloom.embeddings import EmbeddingService, ModelRecord

log = logging.getLogger("agentloom.packs.skills")

TABLE = "skills"
MODEL_TABLE = "skills_model"


class LanceSearchError(DependencyUnavailable):
    """The LanceDB store cannot be opened or read."""

    code = "LANCE_SEARCH_ERROR"


def now_ms() -> int:
    return int(time.time() * 1000)


def ids_in(names: list[str]) -> str:
    """A LanceDB predicate matching these ids (quotes doubled, as SQL wants)."""
    return "id IN (" + ", ".join("'" + n.replace("'", "''") + "'" for n in names) + ")"


def compact_table(table: Any) -> None:
    """Merge the small files of each write and drop old versions (the folder would grow without bound)."""
    import warnings

    with warnings.catch_warnings():
        # Readers in this process retry once on a vanished version; the scan lock keeps writers out.
        warnings.simplefilter("ignore", UserWarning)
        table.optimize(cleanup_older_than=timedelta(seconds=0))


def table_names(db: Any) -> set[str]:
    """The tables of a LanceDB connection (list_tables answers an object with .tables in 0.40)."""
    listed = db.list_tables()
    return set(getattr(listed, "tables", listed))


def skills_schema(dimensions: int) -> Any:
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


class SkillTable:
    """The ``skills`` table of one folder, its model record, and what a running scan has done so far."""

    def __init__(self, path: Path, roots: list[Path], embeddings: EmbeddingService, settings: SkillSettings) -> None:
        self.path = path
        self.roots = roots
        self.embeddings = embeddings
        self.settings = settings
        self.scanning = False
        self.scan_progress: tuple[int, int] = (0, 0)
        self.last_scan: dict[str, Any] | None = None
        self._open_lock = threading.RLock()
        self._db: Any = None
        self._table: Any = None
        self._rows: dict[str, dict[str, Any]] | None = None
        self._rows_version: int | None = None
        self._model_row: dict[str, Any] | None = None

    # -- opening -------------------------------------------------------------------------------
    def failed(self, exc: BaseException) -> LanceSearchError:
        """The error a reader gets when LanceDB fails: where the store is and how to repair it."""
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return LanceSearchError(
            f"LANCE_SEARCH_ERROR: LanceDB connection failed at {self.path}: {detail}. Fix: make sure the folder "
            "exists and is readable and writable (or delete it: `agentloom skills index` rebuilds it)."
        )

    @contextmanager
    def guard(self) -> Iterator[None]:
        """LanceDB's own exceptions become :class:`LanceSearchError`; ours pass unchanged."""
        try:
            yield
        except AgentloomError:
            raise
        except Exception as exc:
            raise self.failed(exc) from exc

    @property
    def opened(self) -> bool:
        """Whether this process has opened LanceDB (a new process can answer from the warm copy first)."""
        return self._table is not None

    def db(self) -> Any:
        """The LanceDB connection (the table is opened or created first)."""
        self.table()
        return self._db

    def table(self) -> Any:
        """The ``skills`` table: opened if it exists (data untouched), created on the first run."""
        with self._open_lock:
            if self._table is not None:
                return self._table
            with self.guard():
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
                    # Another process (a second server on the same data directory) may make it meanwhile.
                    record = self.model()
                    table = db.create_table(TABLE, schema=skills_schema(record.dimensions), exist_ok=True)
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
            db.create_table(MODEL_TABLE, schema=data.schema, exist_ok=True).add(data, mode="overwrite")
        self._model_row = row

    def table_model(self) -> dict[str, Any] | None:
        """The model that made the vectors of the table (None before the first run)."""
        self.table()
        if self._model_row is None:
            with self.guard():
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

    def default_threshold(self) -> float:
        return self.settings.threshold

    def current(self, record: ModelRecord) -> bool:
        """Whether ``record`` made the table's vectors."""
        made = self.table_model()
        return made is not None and made["key"] == record.key and made["fingerprint"] == record.fingerprint

    def rebuild(self, record: ModelRecord) -> None:
        """Drop every vector of the old model: the table is made anew for ``record``."""
        made = self.table_model()
        # The new model must work before the old vectors go (a broken model keeps the keyword fallback useful).
        self.embeddings.embed_query("skills", record.key)
        with self.guard(), self._open_lock:
            self._db.drop_table(TABLE)
            self._table = self._db.create_table(TABLE, schema=skills_schema(record.dimensions))
            self._write_model(self._db, record)
            self._rows = None
        log.warning(
            "skills: the embedding model changed (%s -> %s): re-indexing every skill",
            (made or {}).get("key"),
            record.key,
        )

    # -- rows (without vectors) ------------------------------------------------------------------
    def rows(self) -> dict[str, dict[str, Any]]:
        """Every row by name, metadata flattened in, read again only when the table's version changed."""
        table = self.table()
        with self.guard():
            version = table.version
            if self._rows is None or self._rows_version != version:
                data = table.to_arrow().drop_columns(["vector"]).to_pylist()
                rows = {}
                for row in data:
                    meta = row.pop("metadata") or {}
                    rows[row["name"]] = {**row, **meta}
                self._rows, self._rows_version = rows, version
            return self._rows

    def status_message(self) -> str | None:
        """What a reply says while a scan runs: its results may miss skills not indexed yet."""
        if self.scanning:
            done, total = self.scan_progress
            return (
                f"indexing in progress ({done} of {total} skill folders done): "
                "results come from the skills indexed so far"
            )
        return None
