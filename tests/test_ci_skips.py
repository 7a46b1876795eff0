"""A deliberately skipped test fails a run with CI=true, and only then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

CASES = {
    "test_skipped.py": "import pytest\n\ndef test_skipped():\n    pytest.skip('no such service here')\n",
    "test_import_skipped.py": "import pytest\n\npytest.importorskip('no_such_module_anywhere')\n",
    "test_xfail.py": "import pytest\n\n@pytest.mark.xfail(reason='known')\ndef test_xfail():\n    assert False\n",
}


def _run(folder: Path, ci: str | None, *files: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-ra", "-p", "tests.ci_skips", "-p", "no:cacheprovider", *files],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, code in CASES.items():
        (tmp_path / name).write_text(code)
    return tmp_path


@pytest.mark.parametrize("name", ["test_skipped.py", "test_import_skipped.py"])
def test_a_skip_fails_the_run_under_ci(folder: Path, name: str) -> None:
    got = _run(folder, "true", name)
    assert got.returncode == 1, got.stdout
    assert "skipped under CI=true" in got.stdout
    assert ("no such service here" if name == "test_skipped.py" else "no_such_module_anywhere") in got.stdout


def test_outside_ci_a_skip_passes_and_says_why(folder: Path) -> None:
    got = _run(folder, None, "test_skipped.py")
    assert got.returncode == 0, got.stdout
    assert "SKIPPED" in got.stdout and "no such service here" in got.stdout


def test_an_expected_failure_is_not_a_skip(folder: Path) -> None:
    got = _run(folder, "true", "test_xfail.py")
    assert got.returncode == 0, got.stdout
