"""Logging to stderr only: stdout belongs to the MCP protocol."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from agentloom.core.timestamps import iso


class _Formatter(logging.Formatter):
    """Log lines stamped in the one timestamp format (UTC, milliseconds, Z), as replies are."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso(record.created)


def configure_logging(level: str = "INFO") -> None:
    root = logging.getLogger()
    if any(getattr(h, "_agentloom", False) for h in root.handlers):
        root.setLevel(level)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler._agentloom = True  # type: ignore[attr-defined]  # a marker on a stdlib handler, to find ours again
    handler.setFormatter(_Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    # Third-party chatter that would drown our own messages at INFO.
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send anything written to stdout (Python or C level) to stderr while the block runs.

    Used while packs load, before the stdio transport owns the real stdout: a stray
    ``print`` in a third-party import would otherwise corrupt the protocol stream.
    """
    sys.stdout.flush()
    saved_fd = os.dup(1)
    saved_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = saved_stdout
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
