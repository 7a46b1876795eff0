"""Which files of a repository become documentation: the only place that decides (REQ-18, REQ-19).

Explicit ``paths`` take exactly those files and folders (``.git`` aside). Without paths the
smart filter keeps, outside the excluded folders at any depth:

- files ending in .md, .mdx, .rst or .txt, anywhere;
- README* files, anywhere (every README documents its folder);
- every file under a documentation folder (docs/, documentation/, guides/, examples/,
  tutorials/ at any depth), so example code and configs come along;

and then drops project metadata (CHANGELOG*, LICENSE*, CONTRIBUTING*, AUTHORS*,
CODE_OF_CONDUCT*), binaries (a NUL byte in the first 8 KB) and files over 1 MB. An excluded
folder wins over a documentation folder inside it (src/docs/ is skipped).
"""

from __future__ import annotations

import os
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


def is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(8192)


def smart_select(root: Path) -> list[str]:
    chosen = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d.lower() not in EXCLUDED_DIRS)
        rel_folder = PurePosixPath(Path(folder).relative_to(root).as_posix())
        in_doc_dir = any(part.lower() in DOC_DIRS for part in rel_folder.parts)
        for name in sorted(files):
            lower = name.lower()
            if lower.startswith(EXCLUDED_NAMES):
                continue
            if not (in_doc_dir or lower.startswith("readme") or PurePosixPath(lower).suffix in DOC_EXTENSIONS):
                continue
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            if path.stat().st_size > MAX_FILE_BYTES or is_binary(path):
                continue
            chosen.append((rel_folder / name).as_posix().removeprefix("./"))
    return sorted(chosen)


def explicit_select(root: Path, paths: tuple[str, ...]) -> list[str]:
    chosen: set[str] = set()
    missing = []
    for wanted in paths:
        target = root / wanted
        if wanted.split("/")[0] == ".git" or not target.exists():
            missing.append(wanted)
        elif target.is_file():
            chosen.add(PurePosixPath(wanted).as_posix())
        else:
            for folder, dirs, files in os.walk(target):
                dirs[:] = [d for d in dirs if d != ".git"]
                for name in files:
                    if not (Path(folder) / name).is_symlink():
                        chosen.add((Path(folder) / name).relative_to(root).as_posix())
    if missing:
        available = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir() if p.name != ".git")
        raise MissingPath(missing, available)
    return sorted(chosen)
