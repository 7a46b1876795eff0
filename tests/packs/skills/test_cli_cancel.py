"""`agentloom skills index` stopped with Ctrl-C: it keeps what it committed and says how much (issue 36)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PYTHON
from tests.packs.skills.conftest import write_skill

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def test_ctrl_c_stops_an_index_which_keeps_what_it_committed_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for i in range(3000):
        write_skill(root, f"skill-{i:04d}", f"Skill number {i} handles task {i % 97} for team {i % 13}.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(AGENTLOOM_DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    log = (tmp_path / "stderr.txt").open("w+")
    proc = subprocess.Popen(
        [PYTHON, "-m", "agentloom", "skills", "index", str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    marker = tmp_path / "data" / "skills"
    deadline = time.monotonic() + 120
    while not any(root.glob("*/.vectorized")):  # the first batch is committed (its folders are marked)
        assert proc.poll() is None, (proc.communicate(), (tmp_path / "stderr.txt").read_text())
        assert time.monotonic() < deadline, "no batch was indexed within 120 s"
        time.sleep(0.1)
    seen = len(list(root.glob("*/.vectorized")))  # committed before the signal: kept whatever follows
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)  # a deadline only a hang reaches; the time is not the point
    err = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 130, (out, err)
    found = re.search(
        r"skills indexing cancelled: ([\d,]+) of 3,000 new or changed skills were indexed and are "
        r"kept; run skills_index again to index the rest\.",
        err,
    )
    assert found, err
    kept = int(found.group(1).replace(",", ""))
    assert seen <= kept < 3000  # it stopped before the end, and lost nothing it had committed
    listed = subprocess.run(
        [PYTHON, "-m", "agentloom", "skills", "list", "--json"], env=env, capture_output=True, text=True, check=True
    )
    assert len(json.loads(listed.stdout)["skills"]) == kept
    assert marker.is_dir()
