"""Reading Markdown and text files (and folders of them) for vector_add_files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from agentloom.core.errors import AgentloomError

DEFAULT_PATTERNS = ("*.md", "*.markdown", "*.txt", "*.rst")
MAX_FILE_BYTES = 20 * 1024 * 1024


def expand(paths: list[str], patterns: list[str] | None) -> Iterator[tuple[Path, str]]:
    """(file, document id) pairs: a file's id is its name, a folder's files are ids relative to it."""
    if not paths:
        raise AgentloomError("paths is empty: pass one or more files or folders.")
    globs = tuple(patterns or DEFAULT_PATTERNS)
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_file():
            yield path, path.name
        elif path.is_dir():
            found = sorted({f for g in globs for f in path.rglob(g) if f.is_file()})
            for f in found:
                if any(part.startswith(".") for part in f.relative_to(path).parts):
                    continue  # .git, .venv and other hidden folders
                yield f, f.relative_to(path).as_posix()
        else:
            raise AgentloomError(f"path {raw!r} does not exist: pass an existing file or folder (absolute paths are safest).")


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
