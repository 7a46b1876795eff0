"""Group commit: the workers' callbacks that arrive together are committed together.

Under load most of a callback's database cost is its transaction, not its rows: beginning,
committing (on PostgreSQL, waiting for the WAL flush; on SQLite, writing the same pages of
the WAL again) and, on SQLite, handing the one write lock between server processes. So the
callbacks waiting in one server process go into one transaction (:meth:`Engine.callbacks`),
and each is answered only after that transaction committed: a callback answered 200 is as
durable as before. A lone callback is a batch of one and waits for nothing.

Batches form without a timer: the first callback starts a flush as a task of its own, so the
callbacks the server parsed in the same turn of the event loop join it, and every callback
that arrives while a batch runs joins the next one. One batch at a time per server process:
SQLite runs it on the event loop (it commits without waiting for the disk), PostgreSQL on a
thread. (Measured: two batches at once per process on PostgreSQL halve the batch size and
lose a fifth of the throughput; on SQLite they only wait for each other's write lock.)

If a batch fails (one callback's event raised, the database went away), nothing of it was
committed, and its callbacks are applied again one by one, so each gets its own answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anyio.to_thread

from agentloom.stitch.engine import CallbackCall, Engine, Sending
from agentloom.stitch.execution import Result

log = logging.getLogger(__name__)
MAX_BATCH = 64  # callbacks per transaction: bounds how long one batch holds the write lock
Outcome = tuple[Result, list[Sending]]


class GroupCommit:
    def __init__(self, engine: Engine, *, max_batch: int = MAX_BATCH) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.inline = engine.db.inline
        self._waiting: list[tuple[CallbackCall, asyncio.Future[Outcome]]] = []
        self._flushing: asyncio.Task[None] | None = None  # held: the loop keeps only weak references to tasks

    async def callback(
        self, run_id: str, key: str, attempt: int, status: str, output: Any, error: str | None
    ) -> Outcome:
        """Apply one worker's callback; returns after the transaction holding it committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        self._waiting.append(((run_id, key, attempt, status, output, error), future))
        if self._flushing is None:
            self._flushing = loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
                calls = [call for call, _ in batch]
                if self.inline:
                    outcomes = self._apply(calls)
                else:
                    outcomes = await anyio.to_thread.run_sync(self._apply, calls)
                for (_, future), outcome in zip(batch, outcomes, strict=True):
                    if future.done():  # the request went away
                        continue
                    if isinstance(outcome, BaseException):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
        finally:
            self._flushing = None

    def _apply(self, calls: list[CallbackCall]) -> list[Outcome | Exception]:
        if len(calls) > 1:
            try:
                return list(self.engine.callbacks(calls))
            except Exception:
                log.warning("a batch of %d callbacks failed; applying them one by one", len(calls), exc_info=True)
        outcomes: list[Outcome | Exception] = []
        for call in calls:
            try:
                outcomes.append(self.engine.callback(*call))
            except Exception as exc:  # this callback's own answer: the fast path hands it to the documented route
                outcomes.append(exc)
        return outcomes
