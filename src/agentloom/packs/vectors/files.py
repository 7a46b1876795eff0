"""Reading Markdown and text files (and folders of them) for vector_add_files.

The tool reads only inside *allowed folders*: the client's MCP roots (when the client
declares the roots capability) and the configured ``file_roots``
(``AGENTLOOM_VECTORS__FILE_ROOTS``). Unset, ``file_roots`` is the server's working
directory, except when that is the filesystem root or the home folder (desktop clients
often start servers there, and it would allow everything). Every path is checked after
resolving symlinks, a folder's files one by one (a link inside an allowed folder that
points outside is skipped), and files are read through their resolved path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath

from agentloom.core.errors import AgentloomError

DEFAULT_PATTERNS = ("*.md", "*.markdown", "*.txt", "*.rst")
MAX_FILE_BYTES = 20 * 1024 * 1024
SETTING = "AGENTLOOM_VECTORS__FILE_ROOTS"
HOW_TO_ALLOW = (
    f"set {SETTING} (a JSON list or os.pathsep-separated folders; file_roots in [pack_settings.vectors]) "
    "or open the folder as a workspace root in the client"
)


@dataclass(frozen=True)
class Root:
    path: Path  # resolved
    source: str  # where it comes from, as the refusal shows it

    def __str__(self) -> str:
        return f"{self.path} ({self.source})"


@dataclass(frozen=True)
class Roots:
    """The folders one call may read, and why there are no others."""

    roots: tuple[Root, ...]
    note: str = ""  # e.g. why the working directory is not one of them

    def describe(self) -> str:
        listed = ", ".join(str(r) for r in self.roots) if self.roots else "none"
        return listed + (f"; {self.note}" if self.note else "")

    def owner(self, resolved: Path) -> Root | None:
        return next((r for r in self.roots if resolved == r.path or resolved.is_relative_to(r.path)), None)

    def file_id(self, resolved: Path) -> str:
        """A file's document id: its path relative to the outermost allowed folder holding it, so
        the same file gets the same id whichever folder of it was passed."""
        holders = [r.path for r in self.roots if resolved.is_relative_to(r.path) and resolved != r.path]
        if not holders:
            return resolved.name
        return resolved.relative_to(min(holders, key=lambda p: len(p.parts))).as_posix()


def allowed_roots(client: Iterable[Path], configured: list[Path] | None, cwd: Path) -> Roots:
    """The client's roots, then the configured folders (or the working directory by default)."""
    roots: list[Root] = []
    note = ""
    for path in client:
        roots.append(Root(_resolve(path), "the client's roots"))
    if configured is not None:
        roots.extend(Root(_resolve(p if p.is_absolute() else cwd / p), SETTING) for p in configured)
    else:
        here = _resolve(cwd)
        if here == Path(here.anchor) or here == _resolve(Path.home()):
            note = (
                f"the server's working directory {here} is not used by default because it is the "
                f"{'filesystem root' if here == Path(here.anchor) else 'home folder'}"
            )
        else:
            roots.append(Root(here, f"the server's working directory; {SETTING} unset"))
    unique = {r.path: r for r in reversed(roots)}  # first source wins
    return Roots(tuple(r for r in roots if unique[r.path] is r), note)


def _resolve(path: Path) -> Path:
    return Path(path).expanduser().resolve()


def check_patterns(patterns: list[str] | None) -> tuple[str, ...]:
    """Relative globs like ``*.md``; anything else is refused with the reason."""
    if patterns is None:
        return DEFAULT_PATTERNS
    if not patterns:
        raise AgentloomError(
            f'patterns is empty: pass globs like ["*.md", "*.txt"] or omit it for {list(DEFAULT_PATTERNS)}.'
        )
    for i, pattern in enumerate(patterns):
        at = f"patterns[{i}] {pattern!r}"
        hint = (
            'patterns are relative globs matched inside the folders given in paths, like "*.md" or '
            '"guides/*.txt"; to read another folder, pass it in paths'
        )
        if not isinstance(pattern, str) or not pattern.strip():
            raise AgentloomError(f"{at} is empty: {hint}.")
        if PurePosixPath(pattern).is_absolute() or PureWindowsPath(pattern).anchor or pattern.startswith("~"):
            raise AgentloomError(f"{at} is an absolute path, not a relative glob: {hint}.")
        if ".." in PurePath(pattern.replace("\\", "/")).parts:
            raise AgentloomError(f"{at} leaves the folder with '..': {hint}.")
        if "\x00" in pattern:
            raise AgentloomError(f"{at} contains a NUL character: {hint}.")
    return tuple(patterns)


@dataclass(frozen=True)
class Found:
    path: Path  # as found (shown in replies)
    target: Path | None  # the resolved file to read; None when a link leads out of the allowed folders
    document_id: str


LINK_OUT = "a symbolic link to a file outside the allowed folders (not read)"


def expand(paths: list[str], patterns: list[str] | None, roots: Roots) -> Iterator[Found]:
    """The files to add, each with its document id (see Roots.file_id).

    Every path must resolve inside an allowed folder (else the whole call is refused); a
    relative path is looked up in the allowed folders, in order."""
    if not paths:
        raise AgentloomError("paths is empty: pass one or more files or folders.")
    globs = check_patterns(patterns)
    if not roots.roots:
        raise AgentloomError(
            f"vector_add_files may read no folder: the client declared no roots and there is no "
            f"configured folder ({roots.describe()}). To allow one, {HOW_TO_ALLOW}."
        )
    resolved = [_locate(raw, i, roots) for i, raw in enumerate(paths)]
    for raw, path in zip(paths, resolved, strict=True):
        try:
            if path.is_file():
                yield Found(path, path, roots.file_id(path))
            elif path.is_dir():
                yield from _folder(path, globs, roots)
            else:
                raise AgentloomError(
                    f"path {raw!r} does not exist: pass an existing file or folder inside {roots.describe()}."
                )
        except OSError as exc:
            raise AgentloomError(f"path {raw!r} cannot be read: {exc.strerror or exc}.") from None


def _locate(raw: object, i: int, roots: Roots) -> Path:
    if not isinstance(raw, str) or not raw.strip():
        raise AgentloomError(f"paths[{i}] is empty: pass a file or folder.")
    if "\x00" in raw:
        raise AgentloomError(f"paths[{i}] {raw!r} contains a NUL character.")
    given = Path(raw).expanduser()
    if given.is_absolute():
        candidates = [given]
    else:  # relative: the first allowed folder that holds it
        candidates = [r.path / given for r in roots.roots]
        candidates = [c for c in candidates if c.exists()] or candidates[:1]
    try:
        path = candidates[0].resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise AgentloomError(f"path {raw!r} cannot be resolved: {exc}.") from None
    if roots.owner(path) is None:
        shown = f"{raw!r}" if str(path) == raw else f"{raw!r} (resolved: {path})"
        raise AgentloomError(
            f"path {shown} is outside the folders vector_add_files may read: {roots.describe()}. "
            f"Pass a file or folder inside one of them; to allow another folder, {HOW_TO_ALLOW}."
        )
    return path


def _folder(folder: Path, globs: tuple[str, ...], roots: Roots) -> Iterator[Found]:
    found: set[Path] = set()
    for g in globs:
        try:
            found.update(f for f in folder.rglob(g) if f.is_file())
        except (ValueError, NotImplementedError) as exc:  # what pathlib refuses beyond check_patterns
            raise AgentloomError(f'pattern {g!r} is not a usable glob ({exc}); use globs like "*.md".') from None
    for f in sorted(found):
        relative = f.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue  # .git, .venv and other hidden folders
        target = f.resolve()
        if roots.owner(target) is None:
            yield Found(f, None, relative.as_posix())
        else:
            yield Found(f, target, roots.file_id(target))


def read_text(path: Path) -> str:
    """The file's text, or an AgentloomError saying why it cannot be indexed."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise AgentloomError(f"{size / 2**20:.1f} MB is over the {MAX_FILE_BYTES // 2**20} MB limit per file")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise AgentloomError("binary file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AgentloomError(f"not UTF-8 text (byte {exc.start})") from None
