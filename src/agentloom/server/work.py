"""A tool's long work in a worker thread, with MCP progress and cancellation.

``await run_work("adding document x", fn)`` runs ``fn()`` in a thread as the current
:class:`~agentloom.core.work.Work` of the tool call being served (``calls.py`` marks it with
:func:`serving`), and while it runs:

- sends ``notifications/progress`` (when the client asked for them with a progress token)
  whenever the work reports something new, and at least every ``HEARTBEAT`` seconds even
  when one step takes long (a model built on first use), so a client can tell slow from hung;
- when the request is cancelled (``notifications/cancelled``, the client gone, the server
  stopping), tells the work to stop and waits for it to finish undoing what it started, so
  the next call sees the store as it was. An anyio thread cannot be interrupted, so the work
  stops at its next ``step`` or ``check``; work that reports often stops within a second.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from agentloom.core.work import Report, Work, tracking

log = logging.getLogger(__name__)

T = TypeVar("T")

POLL = 0.2  # seconds between looks at the work's latest report
HEARTBEAT = 1.5  # seconds: the longest a client waits without a progress notification


_request: contextvars.ContextVar[Any] = contextvars.ContextVar("agentloom_request", default=None)


@contextlib.contextmanager
def serving(ctx: Any) -> Iterator[None]:
    """Make ``ctx`` (the MCP Context of the tool call being run) the one :func:`run_work` reports to."""
    token = _request.set(ctx)
    try:
        yield
    finally:
        _request.reset(token)


async def run_work(what: str, fn: Callable[[], T], ctx: Any = None) -> T:
    """``fn()`` in a worker thread, reporting progress to ``ctx`` (default: the current tool call's)."""
    ctx = ctx if ctx is not None else _request.get()
    work = Work(what)
    finished = threading.Event()

    def target() -> T:
        try:
            with tracking(work):
                return fn()
        finally:
            finished.set()

    failed: Exception | None = None
    ended = anyio.Event()  # wakes the reporter for its last word
    async with anyio.create_task_group() as tg:
        if ctx is not None:
            tg.start_soon(_report, ctx, work, ended)
        try:
            result = await anyio.to_thread.run_sync(target, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            tg.cancel_scope.cancel()
            work.cancel(f"{what}: cancelled")
            log.info("%s: cancelled by the client; stopping", what)
            with anyio.CancelScope(shield=True):
                while not finished.is_set():  # noqa: ASYNC110  # a threading.Event: set by the worker thread
                    await anyio.sleep(0.02)
            log.info("%s: stopped", what)
            raise
        except Exception as exc:  # raised below, outside the task group (which would wrap it in a group)
            failed = exc
            tg.cancel_scope.cancel()
        finally:
            ended.set()
    if failed is not None:
        raise failed
    return result


async def _report(ctx: Any, work: Work, ended: anyio.Event) -> None:
    """Progress notifications until the work ends, its last report included."""
    started = time.monotonic()
    shown: Report | None = None
    value = -math.inf  # MCP: each notification's progress must be larger than the last one's
    sent_at = started
    while True:
        with anyio.move_on_after(POLL):
            await ended.wait()
        report = work.latest()
        now = time.monotonic()
        if report is not None and report is not shown:
            message, done, total = report.message, report.done, report.total
        elif now - sent_at >= HEARTBEAT and not ended.is_set():
            message = (report.message if report else work.what) + f" (working, {now - started:.0f} s)"
            done, total = (report.done, report.total) if report else (0.0, None)
        elif ended.is_set():
            return
        else:
            continue
        value = done if done > value else value + 0.001
        shown, sent_at = report, now
        try:
            await ctx.report_progress(value, total, message)
        except Exception:
            log.debug("progress notification not sent", exc_info=True)
            return
