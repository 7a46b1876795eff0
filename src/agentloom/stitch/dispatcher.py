"""Sends the outbox: right after each commit, and from a reconciler that re-drives leases a
crash left behind. Delivery is at least once; attempt tokens make the effect exactly once."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.to_thread
import aiohttp
from anyio.abc import TaskGroup

from agentloom.stitch.engine import Engine, Sending

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(self, engine: Engine, *, timeout: float = 10.0, poll_interval: float = 1.0) -> None:
        self.engine = engine
        self.timeout = timeout
        self.poll_interval = poll_interval
        self._sent: list[int] = []
        self._flush_due = anyio.Event()
        self._tasks: TaskGroup | None = None
        self._client: aiohttp.ClientSession | None = None

    async def run(self, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled: the reconciler loop, the sent-marker, and every send."""
        # aiohttp rather than httpx here: it costs about a third of the CPU per request, and
        # sending webhooks is most of what this process does.
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        connector = aiohttp.TCPConnector(limit=256, limit_per_host=64)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as client, anyio.create_task_group() as tg:
            self._client, self._tasks = client, tg
            tg.start_soon(self._reconcile_forever)
            tg.start_soon(self._mark_sent_forever)
            task_status.started()
            await anyio.sleep_forever()

    def submit(self, sendings: list[Sending]) -> None:
        """Send these now (call from the event loop, after their transaction committed)."""
        if self._tasks is None:
            return  # not running: the reconciler of whichever server runs will send them
        for sending in sendings:
            self._tasks.start_soon(self._send, sending)

    async def reconcile_once(self) -> int:
        due = await anyio.to_thread.run_sync(self.engine.claim_due)
        for sending in due:
            log.info("re-sending %s/%s attempt %d (its lease ran out)", sending.run_id, sending.key, sending.attempt)
        self.submit(due)
        return len(due)

    async def _reconcile_forever(self) -> None:
        while True:
            try:
                await self.reconcile_once()
            except Exception:  # the database may be restarting; try again next round
                log.exception("reconciler round failed")
            await anyio.sleep(self.poll_interval)

    async def _mark_sent_forever(self) -> None:
        while True:
            await self._flush_due.wait()
            self._flush_due = anyio.Event()
            batch, self._sent = self._sent, []
            try:
                await anyio.to_thread.run_sync(self.engine.mark_sent, batch)
            except Exception:  # unmarked rows are re-sent after their lease: harmless duplicates
                log.exception("could not mark %d dispatches sent", len(batch))

    async def _send(self, sending: Sending) -> None:
        reason = await self._post(sending)
        if reason is None:
            self._sent.append(sending.outbox_id)
            self._flush_due.set()
            return
        log.warning("dispatch of %s/%s failed: %s", sending.run_id, sending.key, reason)
        _, more = await anyio.to_thread.run_sync(
            self.engine.dispatch_failed, sending.outbox_id, sending.run_id, sending.key, sending.attempt, reason
        )
        self.submit(more)

    async def _post(self, sending: Sending) -> str | None:
        """Deliver one webhook; the reason it failed, or None. (The connector bounds concurrency.)"""
        assert self._client is not None
        try:
            async with self._client.post(sending.url, json=sending.payload) as response:
                if 200 <= response.status < 300:
                    await response.read()
                    return None
                text = (await response.text(errors="replace"))[:200]
                return f"worker at {sending.url} answered HTTP {response.status}: {text}"
        except TimeoutError:
            return f"worker at {sending.url} did not answer within {self.timeout:g} s"
        except (aiohttp.ClientError, OSError) as exc:
            return f"worker at {sending.url} is unreachable ({type(exc).__name__}: {exc})"
