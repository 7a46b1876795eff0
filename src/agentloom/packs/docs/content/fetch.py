"""Loading a docset's web sources into its folder: init and refresh are the same operation.

Each source is cloned into a scratch folder beside the docset, its files are chosen by
:mod:`selection`, and only changed files are written (each through a temporary file and a
rename), so a failure leaves the previous files whole. One failing source never stops the
others; its previous files and metadata stay.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from agentloom.packs.docs.config import Docset, GitRepoSource, Project
from agentloom.packs.docs.content import state
from agentloom.packs.docs.content.repository import GitRepoLoader, SourceError

Progress = Callable[[str, str, float | None], None]  # (source, phase, fraction)
DEFAULT_MIN_FREE_MB = 100


@dataclass
class SourceResult:
    url: str
    ok: bool
    files: list[str] = field(default_factory=list)
    changed: bool = False
    error: str | None = None
    warning: str | None = None
    commit: str | None = None


@dataclass
class DocsetResult:
    docset: str
    path: Path
    sources: list[SourceResult]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.sources)


@dataclass
class SourceStatus:
    url: str
    last_fetched: str | None
    content_hash: str | None
    file_count: int
    commit: str | None
    error: str | None


def load_docset(project: Project, docset: Docset, *, progress: Progress | None = None,
                min_free_bytes: int | None = None) -> DocsetResult:
    ensure_gitignore(project.knowledge_dir)
    target = docset.path
    target.mkdir(parents=True, exist_ok=True)
    metadata = state.read(target, docset.name)
    _forget_removed_sources(target, metadata, docset.web_sources)
    results = []
    for source in docset.web_sources:
        result = _load_source(target, metadata, source, progress, min_free_bytes)
        results.append(result)
        metadata.updated_at = _now()
        state.write(target, metadata)  # after each source: what is on disk and what is recorded agree
    return DocsetResult(docset.name, target, results)


def docset_status(docset: Docset) -> list[SourceStatus]:
    metadata = state.read(docset.path, docset.name) if docset.path.is_dir() else state.Metadata(docset=docset.name)
    statuses = []
    for source in docset.web_sources:
        entry = metadata.entry(source.url)
        if entry is None:
            statuses.append(SourceStatus(source.url, None, None, 0, None, None))
        else:
            statuses.append(SourceStatus(source.url, entry.last_fetched, entry.content_hash, len(entry.files), entry.commit, entry.error))
    return statuses


def ensure_gitignore(knowledge_dir: Path) -> None:
    path = knowledge_dir / ".gitignore"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not any(line.strip() in ("docsets/", "docsets", "/docsets/") for line in lines):
        path.write_text("\n".join([*lines, "docsets/"]) + "\n", encoding="utf-8")


def _load_source(target: Path, metadata: state.Metadata, source: GitRepoSource, progress: Progress | None,
                 min_free_bytes: int | None) -> SourceResult:
    label = source.url

    def report(phase: str, fraction: float | None) -> None:
        if progress:
            progress(label, phase, fraction)

    entry = metadata.entry(source.url)
    if entry is None:
        entry = state.SourceEntry(url=source.url)
        metadata.sources.append(entry)
    entry.branch, entry.paths, entry.last_attempt = source.branch, list(source.paths) if source.paths else None, _now()
    try:
        _check_disk(target, min_free_bytes)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}-fetch-") as scratch:
            fetched = GitRepoLoader(source).fetch(Path(scratch) / "repo", report)
            digest = content_hash(fetched.folder, fetched.files)
            others = {f for s in metadata.sources if s is not entry for f in s.files}
            report(f"copying {len(fetched.files)} files", 0.97)
            changed = digest != entry.content_hash or any(not (target / f).is_file() for f in fetched.files)
            if changed:
                _install(fetched.folder, fetched.files, target, set(entry.files) - others, fetched.commit_time)
    except SourceError as exc:
        entry.error = str(exc)
        report("failed", None)
        return SourceResult(source.url, False, list(entry.files), False, str(exc))
    except OSError as exc:
        entry.error = f"{source.url}: could not write the docs into {target} ({exc.strerror or exc}); check the folder's permissions and free space"
        report("failed", None)
        return SourceResult(source.url, False, list(entry.files), False, entry.error)
    entry.files, entry.content_hash, entry.commit, entry.error = fetched.files, digest, fetched.commit, None
    entry.last_fetched = entry.last_attempt
    report("done", 1.0)
    return SourceResult(source.url, True, fetched.files, changed, None, fetched.warning, fetched.commit)


def content_hash(folder: Path, files: list[str]) -> str:
    total = hashlib.sha256()
    for name in sorted(files):
        total.update(name.encode() + b"\0" + _file_hash(folder / name).encode() + b"\n")
    return total.hexdigest()


def _file_hash(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _install(source_dir: Path, files: list[str], target: Path, previous: set[str], mtime: float) -> None:
    """Stage every changed file first, then rename them in: a failure while staging changes nothing."""
    staged: list[tuple[Path, Path]] = []
    try:
        for name in files:
            src, dst = source_dir / name, target / name
            if dst.is_file() and _file_hash(dst) == _file_hash(src):
                continue  # unchanged: keep it and its timestamp
            dst.parent.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
            os.close(handle)
            shutil.copyfile(src, temp)
            os.utime(temp, (mtime, mtime))  # the source commit's time: when this content was written
            staged.append((Path(temp), dst))
    except BaseException:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
        raise
    for temp, dst in staged:
        os.replace(temp, dst)
    for name in previous - set(files):
        (target / name).unlink(missing_ok=True)
        _prune_empty(target, (target / name).parent)


def _forget_removed_sources(target: Path, metadata: state.Metadata, sources: tuple[GitRepoSource, ...]) -> None:
    configured = {s.url for s in sources}
    keep = [s for s in metadata.sources if s.url in configured]
    kept_files = {f for s in keep for f in s.files}
    for gone in (s for s in metadata.sources if s.url not in configured):
        for name in set(gone.files) - kept_files:
            (target / name).unlink(missing_ok=True)
            _prune_empty(target, (target / name).parent)
    metadata.sources = keep


def _prune_empty(root: Path, folder: Path) -> None:
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _check_disk(target: Path, min_free_bytes: int | None) -> None:
    if min_free_bytes is None:
        min_free_bytes = int(float(os.environ.get("AGENTIC_KNOWLEDGE_MIN_FREE_MB", DEFAULT_MIN_FREE_MB)) * 1024 * 1024)
    probe = target
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < min_free_bytes:
        raise SourceError(
            f"not enough disk space at {probe}: {free // 2**20} MB free, at least {min_free_bytes // 2**20} MB needed "
            "before downloading; free some space or lower AGENTIC_KNOWLEDGE_MIN_FREE_MB"
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
