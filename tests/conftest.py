"""Fixtures shared by the whole suite."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The mutation tooling (tests/mutation_run.py) changes a session only under `python -m benchmarks
# mutation`, which sets AGENTLOOM_MUTATION; an ordinary run does not load it.
pytest_plugins = ["tests.ci_skips"] + (["tests.mutation_run"] if os.environ.get("AGENTLOOM_MUTATION") else [])

# agentloom's data directory defaults to the user data directory when nothing sets one: no test may
# write into the real one. platformdirs reads XDG_DATA_HOME on Linux; spawned processes inherit it.
_USER_DATA = tempfile.mkdtemp(prefix="agentloom-tests-xdg-data-")
os.environ["XDG_DATA_HOME"] = _USER_DATA
atexit.register(shutil.rmtree, _USER_DATA, ignore_errors=True)


def _shared() -> Path:
    """The workplace's shared test data (benchmarks, notes): AGENTLOOM_SHARED_DATA, else the folder
    beside the checkout (../shared), else /work/shared (a clone made elsewhere, e.g. under /tmp)."""
    candidates = [os.environ.get("AGENTLOOM_SHARED_DATA"), REPO.parent / "shared", "/work/shared"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return REPO.parent / "shared"


SHARED = _shared()


def examples(n: int) -> int:
    """Hypothesis examples for a property test: a quarter under mutation testing (AGENTLOOM_MUTATION,
    set by `python -m benchmarks mutation`, which runs a test once per mutant)."""
    return max(5, n // 4) if os.environ.get("AGENTLOOM_MUTATION") else n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a spawned agentloom process: its own data directory, nothing inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env["AGENTLOOM_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONUNBUFFERED"] = "1"
    return env


PYTHON = sys.executable
# The one timestamp format of agentloom's replies (agentloom.core.timestamps): 2026-11-23T11:32:00.123Z
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


# Expensive fixtures shared across files: every test that uses one runs on the same pytest-xdist worker,
# so the suite starts one of each, not one per worker.
_SHARED_FIXTURE_GROUPS = {"live_flowise": "live-flowise"}


def _xdist_group(item: pytest.Item) -> str | None:
    fixtures = set(getattr(item, "fixturenames", ()))
    for name, group in _SHARED_FIXTURE_GROUPS.items():
        if name in fixtures:
            return group
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(defs and defs[-1].scope in ("module", "class", "package") for defs in definitions.values()):
        return item.nodeid.split("::")[0]  # its module's fixtures are built once, on one worker
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns the groups into scheduling units
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist loadgroup`` (.ci/run), tests go to workers one by one, except that the
    tests of a file with module-scoped fixtures stay together, and so do the users of an expensive
    shared fixture."""
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
