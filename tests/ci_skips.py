"""With ``CI=true``, a skipped test fails the session: in CI every service a test needs is there.

Outside CI a test may skip when a service is missing; ``-ra`` (pyproject's addopts) prints
each skip's reason in the summary. ``importorskip`` and skips at collection count too; an
expected failure (``xfail``) is not a skip.
"""

from __future__ import annotations

import os

import pytest

_SKIPPED: list[str] = []


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _note(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED.append(f"{report.nodeid}: {reason}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _in_ci() and _SKIPPED and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _in_ci() and _SKIPPED:
        terminalreporter.section("skipped under CI=true (each fails the run)", red=True)
        for line in _SKIPPED:
            terminalreporter.line(line)
