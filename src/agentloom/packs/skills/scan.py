"""Scanning skill roots into the index: which skill folders are new, changed, unchanged or gone.

The rule: a skill folder is *unchanged* when the bytes of its SKILL.md have the size and the
sha256 that the index row named after the folder holds, that row was made from this very folder
(same path) with the model in use, and the folder's ``.vectorized`` marker says the same size and
hash (or the folder or its root cannot be written: then the state lives in the database alone).
An unchanged skill costs a file read, a hash and a marker read: no YAML parse, no embedding.

Why skipping the parse is safe: a row is written only for a SKILL.md that parsed, and parsing
requires the skill's name to equal its folder's name, so the row named after this folder with this
path came from this folder; the same bytes parse to the same skill. Everything else takes the slow
way, as on a first scan: parse (format and YAML errors are reported), embed, write the row and the
marker. That covers a new folder, a SKILL.md changed in size, one changed in content alone (same
size, other hash), a missing or stale marker, another model, and a name seen twice. A row whose
folder is gone from a scanned root (or whose SKILL.md no longer exists) is removed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentloom.core.errors import NotFoundError
from agentloom.core.timestamps import iso
from agentloom.core.work import Cancelled, count, current
from agentloom.packs.skills import skipped
from agentloom.packs.skills.skillfile import MARKER, SKILL_FILE, Skill, SkillFormatError, file_digest, parse_skill
from agentloom.packs.skills.table import SkillTable, compact_table, ids_in, now_ms

if TYPE_CHECKING:
    from agentloom.embeddings import ModelRecord

log = logging.getLogger("agentloom.packs.skills")

BATCH = 32  # skills embedded and written per LanceDB merge
Progress = Callable[[int, int, str], None]


def read_marker(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MARKER).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_marker(folder: Path, skill: Skill, indexed_at: int) -> None:
    """``.vectorized``: {indexedAt, skillSize, skillHash}; written whole (temp file, then rename)."""
    target = folder / MARKER
    tmp = folder / f"{MARKER}.tmp"
    tmp.write_text(
        json.dumps({"indexedAt": indexed_at, "skillSize": skill.size, "skillHash": skill.hash}), encoding="utf-8"
    )
    os.replace(tmp, target)


def skill_folders(root: Path) -> Iterator[Path]:
    """``root`` itself when it is a skill folder, else its sub-folders holding SKILL.md (sorted)."""
    if (root / SKILL_FILE).is_file():
        yield root
        return
    try:
        # scandir: the kind of each entry comes with the listing (no stat per child on most systems).
        with os.scandir(root) as entries:
            children = sorted(Path(e.path) for e in entries if not e.name.startswith(".") and e.is_dir())
    except OSError:
        return
    for child in children:
        if (child / SKILL_FILE).is_file():
            yield child


def inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


class Sides(Protocol):
    """The models besides the scoring one (search.py), kept in step batch by batch during a scan, so that what
    the scan reports covers all of its work and nothing is left to do after the last count."""

    def prepare_sides(self) -> None: ...

    def write_sides(self, rows: list[dict[str, Any]]) -> None: ...


class Scanner:
    """Brings one skills table in step with its roots; the caller holds the index's scan lock."""

    def __init__(self, store: SkillTable) -> None:
        self.store = store
        self._readonly_told: set[str] = set()

    def run(
        self,
        record: ModelRecord,
        path: Path | None,
        progress: Progress | None,
        sides: Sides | None = None,
    ) -> dict[str, Any]:
        """(Re)index every root, or one folder; returns the counts (added, updated, unchanged, removed, skipped).
        When something is to be embedded, ``sides`` loads its models first and embeds each batch too."""
        store = self.store
        started = time.perf_counter()
        roots = [path] if path is not None else list(store.roots)
        if path is not None and not path.is_dir():
            raise NotFoundError(
                f"path: {path} is not a folder; give a skill folder (with SKILL.md) or a folder of skills."
            )
        rows = dict(store.rows())
        counts: dict[str, Any] = {"added": 0, "updated": 0, "unchanged": 0, "removed": 0, "skipped": []}
        seen: dict[str, Path] = {}
        todo: list[Skill] = []
        folders = [f for root in roots for f in skill_folders(root)]
        total = len(folders)
        store.scan_progress = (0, total)
        work = current()
        for checked, folder in enumerate(folders):
            if checked % 50 == 0:
                work.step(0, total, f"checking skill folders ({count(checked)} of {count(total)})")
            skill = self._check(folder, rows, seen, record, counts)
            if skill is not None:
                todo.append(skill)
        done = total - len(todo)
        store.scan_progress = (done, total)
        if progress is not None:
            progress(done, total, "checked skill folders")
        if todo and sides is not None:
            sides.prepare_sides()
        try:
            self._write(record, todo, rows, counts, done, total, progress, sides)
        except Cancelled:
            kept = counts["added"] + counts["updated"]
            message = (
                f"skills indexing cancelled: {count(kept)} of {count(len(todo))} new or changed skills were "
                "indexed and are kept; run skills_index again to index the rest."
            )
            log.info("skills: %s", message)
            raise Cancelled(message) from None
        gone = self._remove_gone(rows, seen, roots)
        counts["removed"] = len(gone)
        if (todo or gone) and store.settings.compact:
            with store.guard():
                compact_table(store.table())
        counts["seconds"] = round(time.perf_counter() - started, 3)
        counts["model"] = record.key
        counts["total"] = len(store.rows())
        store.last_scan = {**counts, "at": iso()}  # shown by status: the one timestamp format
        skipped.record(store.path, counts["skipped"], roots)
        log.info(
            "skills: scan done in %.2f s: %d added, %d updated, %d unchanged, %d removed, %d skipped",
            counts["seconds"],
            counts["added"],
            counts["updated"],
            counts["unchanged"],
            counts["removed"],
            len(counts["skipped"]),
        )
        return counts

    def _check(
        self,
        folder: Path,
        rows: dict[str, dict[str, Any]],
        seen: dict[str, Path],
        record: ModelRecord,
        counts: dict[str, Any],
    ) -> Skill | None:
        """The parsed skill when ``folder`` must be (re)indexed; None when unchanged or skipped (counted)."""
        file = folder / SKILL_FILE
        try:
            data = file.read_bytes()
        except OSError as exc:
            log.warning("skills: skipping %s: cannot read it (%s)", file, exc.strerror or exc)
            counts["skipped"].append({"path": str(file), "reason": f"cannot read: {exc.strerror or exc}"})
            return None
        size, digest = len(data), file_digest(data)
        # The fast path (see the module's rule): a valid skill's name is its folder's name.
        if folder.name not in seen and self._unchanged(folder, rows.get(folder.name), size, digest, record):
            seen[folder.name] = folder
            log.debug("Skipping unchanged skill: %s", folder.name)
            counts["unchanged"] += 1
            return None
        try:
            skill = parse_skill(folder, data, digest)
        except SkillFormatError as exc:
            log.warning("skills: skipping %s: %s", file, exc)
            counts["skipped"].append({"path": str(file), "reason": str(exc)})
            return None
        if skill.name in seen:
            reason = f"duplicate name {skill.name!r}: already found at {seen[skill.name]}"
            log.warning("skills: skipping %s: %s", skill.file, reason)
            counts["skipped"].append({"path": str(skill.file), "reason": reason})
            return None
        seen[skill.name] = folder
        return skill

    def _unchanged(self, folder: Path, row: dict[str, Any] | None, size: int, digest: str, record: ModelRecord) -> bool:
        if row is None or row.get("hash") != digest or row.get("size") != size:
            return False
        if row.get("path") != str(folder) or row.get("model") != record.key:
            return False
        marker = read_marker(folder)
        if marker is not None and marker.get("skillSize") == size and marker.get("skillHash") == digest:
            return True
        # No marker can be written there: the row alone says what was indexed.
        return not os.access(folder, os.W_OK) or self._root_readonly(folder)

    def _write(
        self,
        record: ModelRecord,
        todo: list[Skill],
        rows: dict[str, dict[str, Any]],
        counts: dict[str, Any],
        done: int,
        total: int,
        progress: Progress | None,
        sides: Sides | None,
    ) -> None:
        """Embed and upsert ``todo`` in batches (the side models' tables too), then write each folder's marker."""
        if not todo:
            return
        import pyarrow as pa

        store = self.store
        table = store.table()
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            vectors = store.embeddings.embed_documents(
                [s.embedding_text() for s in batch], record.key, lambda *_: current().check()
            )
            now = now_ms()
            data = [
                {
                    "id": s.name,
                    "name": s.name,
                    "description": s.description,
                    "tags": s.tags,
                    "vector": vectors[i].tolist(),
                    "metadata": {
                        "path": str(s.path),
                        "size": s.size,
                        "hash": s.hash,
                        "indexedAt": now,
                        "model": record.key,
                    },
                }
                for i, s in enumerate(batch)
            ]
            with store.guard():
                table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
                    pa.Table.from_pylist(data, schema=table.schema)
                )
            if sides is not None:
                sides.write_sides(data)
            for s in batch:
                counts["updated" if s.name in rows else "added"] += 1
                try:
                    write_marker(s.path, s, now)
                except OSError as exc:
                    self._tell_readonly(s.path, exc)
            done += len(batch)
            store.scan_progress = (done, total)
            if progress is not None:
                progress(done, total, f"{count(done)} of {count(total)} skills indexed (last: {batch[-1].name})")

    def _remove_gone(self, rows: dict[str, dict[str, Any]], seen: dict[str, Path], roots: list[Path]) -> list[str]:
        """Delete the rows whose folder was not found in a scanned root or has no SKILL.md any more."""
        gone = []
        for name, row in rows.items():
            if name in seen:
                continue
            folder = Path(row["path"])
            scanned = any(inside(folder, r) for r in roots)
            if scanned or not (folder / SKILL_FILE).is_file():
                gone.append(name)
        if gone:
            with self.store.guard():
                self.store.table().delete(ids_in(gone))
            log.info("skills: removed %d skill(s) whose folder is gone: %s", len(gone), ", ".join(gone))
        return gone

    def _root_readonly(self, folder: Path) -> bool:
        return any(inside(folder, Path(r)) for r in self._readonly_told)

    def _tell_readonly(self, folder: Path, exc: OSError) -> None:
        root = next((r for r in self.store.roots if inside(folder, r)), folder)
        if str(root) not in self._readonly_told:
            self._readonly_told.add(str(root))
            log.warning(
                "skills: cannot write %s in %s (%s): the root is read-only, index state is kept in the database",
                MARKER,
                root,
                exc.strerror or exc,
            )
