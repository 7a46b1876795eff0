"""Which files of a repository become documentation: the only place that decides.

Explicit ``paths`` take exactly those files and folders (``.git`` aside). Without paths the
smart filter keeps, outside the excluded folders at any depth:

- files ending in .md, .mdx, .rst or .txt, anywhere;
- README* files, anywhere (every README documents its folder);
- every file under a documentation folder (docs/, documentation/, guides/, examples/,
  tutorials/ at any depth), so example code and configs come along;

and then drops project metadata (CHANGELOG*, LICENSE*, CONTRIBUTING*, AUTHORS*,
CODE_OF_CONDUCT*), binaries (a NUL byte in the first 8 KB) and files over 1 MB. An excluded
folder wins over a documentation folder inside it (src/docs/ is skipped).

Symbolic links are never followed: a link named in ``paths`` (or on the way to one) fails the
source with a message naming it; links met while walking a folder are skipped and listed, so a
repository cannot pull ``/etc/passwd`` or another folder's files into a docset.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

DOC_EXTENSIONS = frozenset({".md", ".mdx", ".rst", ".txt"})
DOC_DIRS = frozenset({"docs", "documentation", "guides", "examples", "tutorials"})
EXCLUDED_DIRS = frozenset({"node_modules", "vendor", ".git", "build", "dist", "target", ".cache", "src", "lib"})
EXCLUDED_NAMES = ("changelog", "license", "contributing", "authors", "code_of_conduct")
MAX_FILE_BYTES = 1024 * 1024


class MissingPath(LookupError):
    def __init__(self, missing: list[str], available: list[str]) -> None:
        self.missing, self.available = missing, available
        super().__init__(
            f"not in the repository: {', '.join(missing)}. It has: {', '.join(available) or '(nothing)'}; "
            "fix `paths:` in .knowledge/config.yaml"
        )


class LinkedPath(ValueError):
    """A configured path is (or passes through) a symbolic link."""

    def __init__(self, wanted: str, link: str, target: str) -> None:
        where = link if link == wanted else f"{link} (on the way to {wanted})"
        super().__init__(
            f"{where} is a symbolic link in the repository (to {target}); links are never followed. "
            "Name the real file or folder in `paths:` in .knowledge/config.yaml"
        )


@dataclass
class Selection:
    files: list[str]
    links: list[str] = field(default_factory=list)  # "path -> target" of each link skipped

    def warning(self) -> str | None:
        if not self.links:
            return None
        shown = ", ".join(self.links[:10]) + (f" and {len(self.links) - 10} more" if len(self.links) > 10 else "")
        return f"skipped symbolic links (never followed): {shown}"


def is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(8192)


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _link(root: Path, path: Path) -> str:
    return f"{_rel(root, path)} -> {os.readlink(path)}"


def smart_select(root: Path) -> Selection:
    chosen, links = [], []
    for folder, dirs, files in os.walk(root):  # never descends into a linked folder
        for d in sorted(dirs):
            if d.lower() not in EXCLUDED_DIRS and (Path(folder) / d).is_symlink():
                links.append(_link(root, Path(folder) / d))
        dirs[:] = sorted(d for d in dirs if d.lower() not in EXCLUDED_DIRS and not (Path(folder) / d).is_symlink())
        rel_folder = PurePosixPath(Path(folder).relative_to(root).as_posix())
        in_doc_dir = any(part.lower() in DOC_DIRS for part in rel_folder.parts)
        for name in sorted(files):
            lower = name.lower()
            if lower.startswith(EXCLUDED_NAMES):
                continue
            if not (in_doc_dir or lower.startswith("readme") or PurePosixPath(lower).suffix in DOC_EXTENSIONS):
                continue
            path = Path(folder) / name
            if path.is_symlink():
                links.append(_link(root, path))
                continue
            if not path.is_file():
                continue
            if path.stat().st_size > MAX_FILE_BYTES or is_binary(path):
                continue
            chosen.append((rel_folder / name).as_posix().removeprefix("./"))
    return Selection(sorted(chosen), sorted(links))


def _first_link(root: Path, wanted: str) -> Path | None:
    """The first component of ``wanted`` that is a symbolic link, checked before anything follows it."""
    path = root
    for part in PurePosixPath(wanted).parts:
        path = path / part
        if path.is_symlink():
            return path
        if not path.exists():
            return None
    return None


def explicit_select(root: Path, paths: tuple[str, ...]) -> Selection:
    chosen: set[str] = set()
    links: list[str] = []
    missing = []
    for wanted in paths:
        target = root / wanted
        link = None if wanted.split("/")[0] == ".git" else _first_link(root, wanted)
        if link is not None:
            raise LinkedPath(wanted, _rel(root, link), os.readlink(link))
        if wanted.split("/")[0] == ".git" or not target.exists():
            missing.append(wanted)
        elif target.is_file():
            chosen.add(PurePosixPath(wanted).as_posix())
        else:
            for folder, dirs, files in os.walk(target):  # never descends into a linked folder
                links += [_link(root, Path(folder) / d) for d in dirs if (Path(folder) / d).is_symlink()]
                dirs[:] = [d for d in dirs if d != ".git" and not (Path(folder) / d).is_symlink()]
                for name in files:
                    if (Path(folder) / name).is_symlink():
                        links.append(_link(root, Path(folder) / name))
                    else:
                        chosen.add((Path(folder) / name).relative_to(root).as_posix())
    if missing:
        available = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir() if p.name != ".git")
        raise MissingPath(missing, available)
    return Selection(sorted(chosen), sorted(set(links)))
