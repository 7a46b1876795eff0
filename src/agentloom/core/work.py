"""Long work and whoever waits for it: progress to report, and a way to stop it.

Work that can take more than about a second (embedding a large document, indexing a folder,
building a model) runs in a worker thread and holds a :class:`Work`. Between units (a batch
of chunks, a file, a skill) it calls ``work.step(done, total, message)``: that records how
far it got and raises :class:`Cancelled` once the caller has gone. The caller, the MCP
server (``server/work.py``) or the command line (``terminal/progress.py``), reads the record on
its own schedule and shows it; it never runs inside the worker.

The current thread's work is found with :func:`current`, so code deep in a call (the
embedding service building a model on first use) can report and stop without every layer
passing it along. Outside any tracked work it is a :class:`Work` nobody watches: reports
go nowhere and nothing is ever cancelled.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agentloom.core.errors import AgentloomError


class Cancelled(AgentloomError):
    """The caller stopped the work: a cancelled request, a closed client, Ctrl-C."""


@dataclass(frozen=True)
class Report:
    """How far the work got: ``done`` of ``total`` (None: unknown), in words."""

    done: float
    total: float | None
    message: str
    at: float  # monotonic seconds


class Work:
    """One piece of long work: its latest progress and whether it should stop (thread-safe)."""

    def __init__(self, what: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._report: Report | None = None
        self._reason = ""
        self._interrupts: list[Callable[[], None]] = []

    # -- the worker's side ----------------------------------------------------------------
    def step(self, done: float, total: float | None = None, message: str = "") -> None:
        """Record progress, then stop here if the caller has gone (raises :class:`Cancelled`)."""
        with self._lock:
            self._report = Report(done, total, message, self._clock())
        self.check()

    def note(self, message: str) -> None:
        """Say what is happening without a count (a model being built): keeps the last count."""
        with self._lock:
            last = self._report
            self._report = Report(last.done if last else 0, last.total if last else None, message, self._clock())

    def check(self) -> None:
        if self._stop.is_set():
            raise Cancelled(self._reason or f"{self.what or 'the work'} was cancelled")

    @contextlib.contextmanager
    def interruptible(self, interrupt: Callable[[], None]) -> Iterator[None]:
        """Within the block, a cancel also calls ``interrupt()`` (from the canceller's thread): for one
        long library call that can be told to stop (an onnxruntime run), rather than waiting for it."""
        with self._lock:
            self._interrupts.append(interrupt)
        try:
            if self.cancelled:
                interrupt()
            yield
        finally:
            with self._lock:
                self._interrupts.remove(interrupt)

    # -- the caller's side ----------------------------------------------------------------
    def cancel(self, reason: str = "") -> None:
        self._reason = reason
        self._stop.set()
        with self._lock:
            interrupts = list(self._interrupts)
        for interrupt in interrupts:
            interrupt()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def latest(self) -> Report | None:
        with self._lock:
            return self._report


_current: contextvars.ContextVar[Work | None] = contextvars.ContextVar("agentloom_work", default=None)


def current() -> Work:
    """The work this thread does for a caller, or an unwatched one."""
    return _current.get() or Work()


@contextlib.contextmanager
def tracking(work: Work) -> Iterator[Work]:
    """Make ``work`` the current work of this thread (and of threads started with its context)."""
    token = _current.set(work)
    try:
        yield work
    finally:
        _current.reset(token)


def current_step(done: float, total: float | None = None, message: str = "") -> None:
    """``current().step``: a progress callback for code that takes one (it may raise :class:`Cancelled`)."""
    current().step(done, total, message)


def count(n: float) -> str:
    """A count as people write it: 1,200 (and 3.5 for fractions)."""
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"
