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

import html
import importlib.metadata
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
    shutil.copy2(REPO / "pyproject.toml", source)
    shutil.copy2(REPO / "README.md", source)
    if (REPO / "MANIFEST.in").is_file():
        shutil.copy2(REPO / "MANIFEST.in", source)
    skip = ["__pycache__", "*.egg-info"] + ([] if console else ["console_dist"])
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns(*skip))
    # Isolated, as a release is built: pyproject's [build-system] pins its setuptools, which the
    # test environment need not have (pip fetches it once into its cache).
    done = subprocess.run(
        [sys.executable, "-m", "build", *([] if console else ["--wheel"]), "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
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
