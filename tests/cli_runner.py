"""``agentloom ARGS`` run inside the test process, answered like a real process: stdout, stderr, exit code.

A real ``python -m agentloom`` costs about a second of CPU in imports before it does anything, and a
file of command-line tests runs dozens. Here the same typer app that ``agentloom.cli.main`` runs
(core commands plus every pack's) is invoked with typer's ``CliRunner``, with exactly the
environment given (variables not in ``env`` are unset for the call), stdin from ``input``, and the
exit code click would give the process. An exception that a real process would print as a traceback
is raised into the test instead, so it fails there. Logging handlers a command installs on the
captured stderr are removed afterwards, so the next command starts as a new process would.

Tests about the process itself (start-up, signals, what reaches stdout, the console script) run a
real one: tests/cli/test_cli.py, tests/packs/skills/test_warm.py and others.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import typer
from typer.testing import CliRunner

_APP: typer.Typer | None = None


def _app() -> typer.Typer:
    global _APP
    if _APP is None:
        from agentloom.cli import add_pack_commands, app

        add_pack_commands(app)
        _APP = app
    return _APP


def agentloom(
    env: Mapping[str, str], *args: str, input: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``agentloom *args`` with ``env`` as its whole environment; ``input`` typed at stdin (None: stdin closed)."""
    env = {**env, "COLUMNS": env.get("COLUMNS", "250")}  # rich and typer wrap at the terminal width
    changes: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    changes.update(env)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in ("httpx", "httpcore", "uvicorn.access")}
    before = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner().invoke(
            _app(), list(args), input=input or "", env=changes, terminal_width=250, prog_name="agentloom"
        )
    finally:
        os.chdir(before)
        for handler in root.handlers:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
        for name, value in levels.items():
            logging.getLogger(name).setLevel(value)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["agentloom", *args], result.exit_code, result.stdout, result.stderr)
