"""Real git repositories for the tests: a work tree pushed to a bare repository served by file://."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PNG = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(64)
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_AUTHOR_DATE": "2024-03-01T12:00:00+00:00",
    "GIT_COMMITTER_DATE": "2024-03-01T12:00:00+00:00",
}
COMMIT_TIME = 1709294400  # 2024-03-01T12:00:00Z

# A realistic project: documentation worth keeping and everything the smart filter must drop.
PROJECT: dict[str, bytes | str] = {
    "README.md": "# Project\n",
    "CHANGELOG.md": "## 1.0\n",
    "LICENSE": "MIT\n",
    "LICENSE.md": "MIT\n",
    "CONTRIBUTING.md": "PRs welcome\n",
    "AUTHORS": "me\n",
    "CODE_OF_CONDUCT.md": "be nice\n",
    "notes.txt": "plain notes\n",
    "setup.py": "print('x')\n",
    "docs/index.md": "# Docs\n",
    "docs/api/reference.rst": "Reference\n=========\n",
    "docs/guide.mdx": "# Guide\n",
    "docs/conf.py": "project = 'x'\n",
    "docs/logo.png": PNG,
    "docs/huge.md": "x" * (1024 * 1024 + 10),
    "guides/start.md": "# Start\n",
    "examples/hello.py": "print('hello')\n",
    "tutorials/one/step.md": "# Step\n",
    "documentation/faq.md": "# FAQ\n",
    "src/module.py": "def f(): ...\n",
    "src/docs/internal.md": "# internal\n",
    "lib/util.md": "# lib\n",
    "node_modules/pkg/README.md": "# dep\n",
    "vendor/x/guide.md": "# vendored\n",
    "build/out.md": "# built\n",
    "dist/pkg.txt": "dist\n",
    "target/t.md": "# target\n",
    ".cache/c.md": "# cache\n",
    "packages/core/README.md": "# core\n",
}
SMART_SELECTION = [
    "README.md",
    "docs/api/reference.rst",
    "docs/conf.py",
    "docs/guide.mdx",
    "docs/index.md",
    "documentation/faq.md",
    "examples/hello.py",
    "guides/start.md",
    "notes.txt",
    "packages/core/README.md",
    "tutorials/one/step.md",
]


@dataclass(frozen=True)
class Link:
    """A symbolic link committed to a repository (git stores the target text as written)."""

    target: str


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout


class Repo:
    """A bare repository (``url``) and the work tree that pushes to it."""

    def __init__(self, root: Path, files: dict[str, bytes | str | Link] | None = None, branch: str = "main") -> None:
        self.bare = root / "remote.git"
        self.work = root / "work"
        self.work.mkdir(parents=True)
        git("init", "-q", "--bare", "-b", branch, str(self.bare), cwd=root)
        git("init", "-q", "-b", branch, cwd=self.work)
        git("remote", "add", "origin", str(self.bare), cwd=self.work)
        self.branch = branch
        self.commit(files if files is not None else PROJECT)

    @property
    def url(self) -> str:
        return self.bare.as_uri()

    def commit(
        self, files: Mapping[str, bytes | str | Link], delete: tuple[str, ...] = (), message: str = "update"
    ) -> None:
        for name, content in files.items():
            path = self.work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Link):
                path.symlink_to(content.target)
            elif isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        for name in delete:
            git("rm", "-q", name, cwd=self.work)
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", message, cwd=self.work)
        git("push", "-q", "origin", self.branch, cwd=self.work)

    def branch_off(self, name: str, files: dict[str, bytes | str]) -> None:
        git("checkout", "-q", "-b", name, cwd=self.work)
        previous, self.branch = self.branch, name
        self.commit(files)
        git("checkout", "-q", previous, cwd=self.work)
        self.branch = previous

    def set_default_branch(self, name: str) -> None:
        """Point the bare repository's HEAD at ``name`` (which need not exist)."""
        git("symbolic-ref", "HEAD", f"refs/heads/{name}", cwd=self.bare)


def empty_repo(root: Path, branch: str = "main") -> str:
    """A bare repository with no commit at all (``git init --bare``); its file:// URL."""
    root.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "--bare", "-b", branch, str(root / "empty.git"), cwd=root)
    return (root / "empty.git").as_uri()
