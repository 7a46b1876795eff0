"""Sends the outbox: right after each commit, and from a reconciler that re-drives leases a
crash left behind. Delivery is at least once; attempt tokens make the effect exactly once.

Targets follow :mod:`webhooks`: address literals are checked before sending, host names by
the resolver the connection uses; redirects are not followed; of an error answer only a
short excerpt without control characters is kept (it becomes the node's error).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import aiohttp
from anyio.abc import TaskGroup

from agentloom.stitch.engine import Engine, Sending
from agentloom.stitch.webhooks import EXCERPT_BYTES, TargetRefused, WebhookPolicy, excerpt, shown_url

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(self, engine: Engine, *, timeout: float = 10.0, poll_interval: float = 1.0,
                 webhooks: WebhookPolicy | None = None) -> None:
        self.engine = engine
        self.webhooks = webhooks or engine.webhooks
        self._literal_checks: dict[str, str | None] = {}  # url -> why its address literal is refused
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
        connector = aiohttp.TCPConnector(limit=256, limit_per_host=64, resolver=self.webhooks.resolver())
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
        refused = self._literal_problem(sending.url)
        if refused:
            return f"webhook to {shown_url(sending.url)} refused: {refused}; allow it with STITCH_WEBHOOK_ALLOW if that is intended"
        try:
            async with self._client.post(sending.url, json=sending.payload, allow_redirects=False) as response:
                if 200 <= response.status < 300:
                    await response.read()
                    return None
                worker = f"worker at {shown_url(sending.url)} answered HTTP {response.status}"
                if 300 <= response.status < 400:
                    location = excerpt(response.headers.get("Location", ""), 120) or "nowhere"
                    return f"{worker}, a redirect to {location}: redirects are not followed; set data.webhookUrl to the final URL"
                return f"{worker}: {excerpt(await response.content.read(EXCERPT_BYTES))}"
        except TargetRefused as exc:
            return f"webhook to {shown_url(sending.url)} refused: {exc}"
        except TimeoutError:
            return f"worker at {shown_url(sending.url)} did not answer within {self.timeout:g} s"
        except (aiohttp.ClientError, OSError) as exc:
            if isinstance(exc.__cause__, TargetRefused):
                return f"webhook to {shown_url(sending.url)} refused: {exc.__cause__}"
            return f"worker at {shown_url(sending.url)} is unreachable ({type(exc).__name__}: {excerpt(str(exc))})"

    def _literal_problem(self, url: str) -> str | None:
        """Address literals never reach the resolver, so they are checked here (cached per URL)."""
        try:
            return self._literal_checks[url]
        except KeyError:
            pass
        try:
            problem = self.webhooks.literal_problem(urlsplit(url).hostname)
        except ValueError:
            problem = None  # not a URL aiohttp can send to either: it reports that itself
        if len(self._literal_checks) > 4096:
            self._literal_checks.clear()
        self._literal_checks[url] = problem
        return problem
