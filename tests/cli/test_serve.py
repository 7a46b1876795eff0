"""`agentloom serve --http` on a busy port, and `python -m benchmarks --help`."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tests.conftest import PYTHON, REPO


@pytest.mark.slow
def test_a_busy_port_is_the_first_and_only_thing_said(server_env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run(
            [PYTHON, "-m", "agentloom", "serve", "--http", "--port", str(port), "--packs", "docs"],
            env=server_env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: it is in use by another program. Stop the other server "
        "or choose another port with --port N (or AGENTLOOM_PORT)."
    )
    assert result.stdout == ""


def test_benchmarks_help() -> None:
    shown = subprocess.run([PYTHON, "-m", "benchmarks", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: python -m benchmarks [SUITE ...]")
