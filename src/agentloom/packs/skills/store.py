"""The skill index: a LanceDB table of skills, kept in step with the skill folders on disk.

The table and its model record live in ``table.py``; scanning the roots (what counts as unchanged,
new, changed or gone) in ``scan.py``; ranking in ``search.py``. This module ties them together and
answers the pack's tools (get, list, remove, status).
"""

from __future__ import annotations

import datetime
import difflib
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import NotFoundError
from agentloom.core.timestamps import iso
from agentloom.packs.skills import skipped
from agentloom.packs.skills.replies import Removed, SearchResult, SkillDetail, SkillLine, SkillList, Skipped
from agentloom.packs.skills.scan import Progress, Scanner
from agentloom.packs.skills.search import SkillSearch
from agentloom.packs.skills.settings import SkillSettings, default_roots
from agentloom.packs.skills.skillfile import MARKER, SKILL_FILE, SkillFormatError, parse_skill
from agentloom.packs.skills.table import SkillTable, ids_in

if TYPE_CHECKING:
    from agentloom.embeddings import EmbeddingService, ModelRecord

log = logging.getLogger("agentloom.packs.skills")


class SkillIndex:
    """The skill index: a :class:`SkillTable` kept in step with the roots by a :class:`Scanner`, searched by
    a :class:`SkillSearch`. The three share the table object; this class holds the scan lock and thread."""

    @classmethod
    def open(cls, folder: Path, embeddings: EmbeddingService, settings: SkillSettings) -> SkillIndex:
        """The index in the pack's folder over the configured roots (or the defaults): for setup and the CLI."""
        roots = [Path(r).expanduser() for r in settings.roots] if settings.roots is not None else default_roots(folder)
        return cls(folder / "skills.lance", roots, embeddings, settings)

    def __init__(self, path: Path, roots: list[Path], embeddings: EmbeddingService, settings: SkillSettings) -> None:
        self.store = SkillTable(path, roots, embeddings, settings)
        self._scan_lock = threading.RLock()
        self.scanner = Scanner(self.store)  # scan.py: the scanning rule and its code
        # search.py: ranking, scores and the second model's table
        self.searcher = SkillSearch(self.store, self.ensure_model)
        self.scan_error: str | None = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    # -- the table's state, read and set through the shared object ----------------------------------
    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def roots(self) -> list[Path]:
        return self.store.roots

    @property
    def embeddings(self) -> EmbeddingService:
        return self.store.embeddings

    @property
    def settings(self) -> SkillSettings:
        return self.store.settings

    @property
    def scanning(self) -> bool:
        return self.store.scanning

    @scanning.setter
    def scanning(self, value: bool) -> None:
        self.store.scanning = value

    @property
    def scan_progress(self) -> tuple[int, int]:
        return self.store.scan_progress

    @scan_progress.setter
    def scan_progress(self, value: tuple[int, int]) -> None:
        self.store.scan_progress = value

    @property
    def last_scan(self) -> dict[str, Any] | None:
        return self.store.last_scan

    def table(self) -> Any:
        """The ``skills`` table (opened or created on first use)."""
        return self.store.table()

    def table_model(self) -> dict[str, Any] | None:
        return self.store.table_model()

    def model(self) -> ModelRecord:
        return self.store.model()

    def default_threshold(self) -> float:
        return self.store.default_threshold()

    def rows(self) -> dict[str, dict[str, Any]]:
        return self.store.rows()

    def ensure_model(self) -> ModelRecord:
        """The model in use, with the table rebuilt and re-indexed when it was made by another one."""
        record = self.store.model()
        if self.store.current(record):
            return record
        with self._scan_lock:
            record = self.store.model()
            if not self.store.current(record):
                self.store.rebuild(record)
                self.scanner.run(record, None, None)
        return record

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
        path = path.expanduser() if path is not None else None
        with self._scan_lock:
            self.scanning = True
            try:
                record = self.store.model()
                self.store.table()
                if not self.store.current(record):
                    self.store.rebuild(record)
                    path = None  # everything must be indexed again
                counts = self.scanner.run(record, path, progress, self.searcher)
            finally:
                self.scanning = False
        # The side models' vectors follow the table now, not at the next search.
        self.searcher.after_scan(embedded=counts["added"] + counts["updated"] > 0)
        return counts

    # -- reading -----------------------------------------------------------------------------------
    def search(self, query: str, limit: int = 5, threshold: float | None = None) -> SearchResult:
        """Best skills first, sorted by score (search.py explains the scores); skill folders that could not be
        indexed are named (skipped.py)."""
        result = self.searcher.search(query, limit, threshold)
        left_out = self.skipped()
        if left_out:
            result["skipped"] = left_out
            result["message"] = "; ".join(m for m in (result["message"], skipped.summary(left_out)) if m)
        return result

    def skipped(self) -> list[Skipped]:
        """Skill folders the last scans could not index, with the reason and the fix."""
        return skipped.load(self.path)

    def names(self) -> list[str]:
        return sorted(self.rows())

    def row(self, name: str) -> dict[str, Any]:
        rows = self.rows()
        if name not in rows:
            near = difflib.get_close_matches(name, list(rows), n=3, cutoff=0.5)
            hint = f"nearest: {', '.join(near)}" if near else "skills_list shows every indexed skill"
            raise NotFoundError(f"name: no indexed skill {name!r}; {hint}.")
        return rows[name]

    def get(self, name: str) -> SkillDetail:
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
        detail: SkillDetail = {
            "name": skill.name,
            "description": skill.description,
            "tags": skill.tags,
            "path": str(folder),
            "body": skill.body,
            "files": files,
        }
        if skill.extra:
            detail["metadata"] = _jsonable(skill.extra)
        return detail

    def list(self) -> SkillList:
        skills: list[SkillLine] = []
        for name, row in sorted(self.rows().items()):
            line = (row["description"] or "").split(". ")[0]
            if len(line) > 120:
                line = line[:119].rstrip() + "…"
            skills.append({"name": name, "description": line})
        return {"skills": skills, "count": len(skills), "message": self.store.status_message()}

    def remove(self, name: str) -> Removed:
        row = self.row(name)
        with self._scan_lock, self.store.guard():
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
            "up_to_date_model": self.store.current(record),
            "default_threshold": self.default_threshold(),
            "rank_model": self.settings.rank_model or None,
            "rank_model_state": self.searcher.rank_state(),
            "english_model": self.settings.english_model or None,
            "english_model_state": self.searcher.side_state(self.searcher.sides[1]),
            "version": int(self.table().version),
            "scanning": self.scanning,
            "last_scan": self.last_scan,
        }


def _jsonable(value: Any) -> Any:
    """Front matter as JSON: a YAML time in the one timestamp format, a date as 2026-11-23, anything else as text."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> str:
    if isinstance(value, datetime.datetime):
        return iso(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)
