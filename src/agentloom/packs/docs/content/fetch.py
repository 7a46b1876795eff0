"""Loading a docset's web sources into its folder: init and refresh are the same operation.

Each source is cloned into a scratch folder beside the docset, its files are chosen by
:mod:`selection`, and only changed files are written (each through a temporary file and a
rename), so a failure leaves the previous files whole. One failing source never stops the
others; its previous files and metadata stay.

Nothing is written outside the docset folder: a docset with web sources must live inside the
project (unless it sets ``allow_outside_project: true``), never in a ``.git`` folder, and
every file below it is reached without following a symbolic link (see :mod:`safefs`). A file
is deleted only while it still holds what this loader wrote there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentloom.core.timestamps import iso, parse
from agentloom.packs.docs.config import Docset, GitRepoSource, Project
from agentloom.packs.docs.content import state
from agentloom.packs.docs.content.repository import GitRepoLoader, SourceError
from agentloom.packs.docs.content.safefs import Folder, UnsafePath

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
    warnings: list[str] = field(default_factory=list)  # refused metadata entries, files kept, ...

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


def load_docset(
    project: Project, docset: Docset, *, progress: Progress | None = None, min_free_bytes: int | None = None
) -> DocsetResult:
    try:
        target = writable_folder(project, docset)
    except SourceError as exc:  # refused before anything is written
        return DocsetResult(
            docset.name, docset.path, [SourceResult(s.url, False, error=str(exc)) for s in docset.web_sources]
        )
    warnings: list[str] = []
    note = ensure_gitignore(project.knowledge_dir)
    if note:
        warnings.append(note)
    target.mkdir(parents=True, exist_ok=True)
    with Folder(target, f"the docset folder {target}", _DOCSET_FIX) as dest:
        metadata = state.read(target, docset.name)
        warnings += metadata.problems
        _forget_removed_sources(dest, metadata, docset.web_sources, warnings)
        results = []
        for source in docset.web_sources:
            result = _load_source(dest, metadata, source, progress, min_free_bytes, warnings)
            results.append(result)
            metadata.updated_at = _now()
            state.write(target, metadata)  # after each source: what is on disk and what is recorded agree
    return DocsetResult(docset.name, docset.path, results, warnings)


_DOCSET_FIX = "Remove it (the loader never makes links), then retry"


def writable_folder(project: Project, docset: Docset) -> Path:
    """The docset's folder with every link resolved, once it is known to be a place web sources may write:
    inside the project (or anywhere, with ``allow_outside_project``), never the project itself, a folder
    holding it, its .knowledge folder, or a .git folder."""
    name, shown = docset.name, docset.local_path
    root = Path(os.path.realpath(project.root))
    folder = Path(os.path.realpath(docset.path))
    via = _link_on_the_way(docset.path)
    through = f" (through the symbolic link {via})" if via else ""
    below = folder.relative_to(root).parts if root in folder.parents else folder.parts
    if any(part.lower() == ".git" for part in below):
        raise SourceError(
            f"{name}: the folder {shown} is inside a .git folder{through}, where git would run what "
            "is written; set `local_path` to another folder"
        )
    if folder == root or folder in root.parents:
        raise SourceError(
            f"{name}: the folder {shown} is{through} the project folder or contains it; web sources "
            f"need a folder of their own, such as the default .knowledge/docsets/{name}/ (remove `local_path`)"
        )
    if folder == Path(os.path.realpath(project.knowledge_dir)):
        raise SourceError(
            f"{name}: the folder {shown} is{through} the .knowledge folder itself; use a folder below "
            f"it, such as the default .knowledge/docsets/{name}/ (remove `local_path`)"
        )
    if root not in folder.parents and not docset.allow_outside_project:
        raise SourceError(
            f"{name}: the folder {shown} is outside the project folder {root.as_posix()}/{through}, and web sources "
            "write only inside the project. Set `local_path` to a folder inside the project, or add "
            f"`allow_outside_project: true` to docset {name} in {project.config_path} if it should write there"
        )
    return folder


def _link_on_the_way(path: Path) -> str | None:
    """The first symbolic link among ``path`` and its parents, as "link -> target"."""
    for candidate in reversed((path, *path.parents)):
        if candidate.is_symlink():
            return f"{candidate} -> {os.readlink(candidate)}"
    return None


def docset_status(docset: Docset) -> list[SourceStatus]:
    metadata = state.read(docset.path, docset.name) if docset.path.is_dir() else state.Metadata(docset=docset.name)
    statuses = []
    for source in docset.web_sources:
        entry = metadata.entry(source.url)
        if entry is None:
            statuses.append(SourceStatus(source.url, None, None, 0, None, None))
        else:
            statuses.append(
                SourceStatus(
                    source.url,
                    _shown(entry.last_fetched),
                    entry.content_hash,
                    len(entry.files),
                    entry.commit,
                    entry.error,
                )
            )
    return statuses


def _shown(stamp: str | None) -> str | None:
    """A recorded time in the one format; metadata written before it (``+00:00``, seconds) is
    converted, and text that is no time at all is shown as it is."""
    if not stamp:
        return stamp
    try:
        return iso(parse(stamp))
    except ValueError:
        return stamp


def ensure_gitignore(knowledge_dir: Path) -> str | None:
    """Add a ``docsets/`` line to ``.knowledge/.gitignore``; a warning instead when that file is a link."""
    path = knowledge_dir / ".gitignore"
    if path.is_symlink():
        return (
            f"{path} is a symbolic link (to {os.readlink(path)}), which is never followed, so it was not "
            "updated; add a `docsets/` line to the file you want git to read"
        )
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not any(line.strip() in ("docsets/", "docsets", "/docsets/") for line in lines):
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        handle, temp = tempfile.mkstemp(dir=knowledge_dir, prefix=".gitignore.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write("\n".join([*lines, "docsets/"]) + "\n")
        os.chmod(temp, mode)
        os.replace(temp, path)  # replaces the entry; never writes through a link made meanwhile
    return None


def _load_source(
    dest: Folder,
    metadata: state.Metadata,
    source: GitRepoSource,
    progress: Progress | None,
    min_free_bytes: int | None,
    warnings: list[str],
) -> SourceResult:
    label = source.url
    target = dest.root

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
            with Folder(fetched.folder, f"the repository {source.url}", "Name real files in `paths:`") as repo:
                hashes = {name: repo.file_hash(name) or "" for name in fetched.files}
                digest = content_hash(hashes)
                others = {f for s in metadata.sources if s is not entry for f in s.files}
                report(f"copying {len(fetched.files)} files", 0.97)
                changed = digest != entry.content_hash or any(dest.lstat(f) is None for f in fetched.files)
                if changed:
                    previous = {f: entry.hashes.get(f) for f in entry.files if f not in others}
                    _install(repo, hashes, dest, previous, fetched.commit_time, warnings)
    except SourceError as exc:
        entry.error = str(exc)
        report("failed", None)
        return SourceResult(source.url, False, list(entry.files), False, str(exc))
    except UnsafePath as exc:
        entry.error = f"{source.url}: {exc}"
        report("failed", None)
        return SourceResult(source.url, False, list(entry.files), False, entry.error)
    except OSError as exc:
        entry.error = (
            f"{source.url}: could not write the docs into {target} ({exc.strerror or exc}); "
            "check the folder's permissions and free space"
        )
        report("failed", None)
        return SourceResult(source.url, False, list(entry.files), False, entry.error)
    entry.files, entry.hashes, entry.content_hash, entry.commit, entry.error = (
        fetched.files,
        hashes,
        digest,
        fetched.commit,
        None,
    )
    entry.last_fetched = entry.last_attempt
    report("done", 1.0)
    return SourceResult(source.url, True, fetched.files, changed, None, fetched.warning, fetched.commit)


def content_hash(hashes: dict[str, str]) -> str:
    """One hash of a set of files, from each file's name and sha256."""
    total = hashlib.sha256()
    for name in sorted(hashes):
        total.update(name.encode() + b"\0" + hashes[name].encode() + b"\n")
    return total.hexdigest()


def _install(
    repo: Folder,
    hashes: dict[str, str],
    dest: Folder,
    previous: dict[str, str | None],
    mtime: float,
    warnings: list[str],
) -> None:
    """Stage every changed file first, then rename them in: a failure while staging changes nothing."""
    staged = []
    try:
        for name, digest in hashes.items():
            if dest.file_hash(name) == digest:
                continue  # unchanged: keep it and its timestamp
            staged.append(dest.stage(name, repo, mtime))
    except BaseException:
        for item in staged:
            dest.discard(item)
        raise
    for item in staged:
        dest.commit(item)
    for name in sorted(set(previous) - set(hashes)):
        _remove(dest, name, previous[name], warnings)


def _remove(dest: Folder, name: str, written: str | None, warnings: list[str]) -> None:
    kept = dest.remove(name, written)
    if kept:
        warnings.append(f"kept {name} in {dest.root}: {kept}; delete it yourself if it is no longer wanted")


def _forget_removed_sources(
    dest: Folder, metadata: state.Metadata, sources: tuple[GitRepoSource, ...], warnings: list[str]
) -> None:
    configured = {s.url for s in sources}
    keep = [s for s in metadata.sources if s.url in configured]
    kept_files = {f for s in keep for f in s.files}
    for gone in (s for s in metadata.sources if s.url not in configured):
        for name in sorted(set(gone.files) - kept_files):
            _remove(dest, name, gone.hashes.get(name), warnings)
    metadata.sources = keep


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
    return iso()
