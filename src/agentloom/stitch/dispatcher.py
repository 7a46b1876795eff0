"""Sends the outbox: right after each commit, and from a reconciler that re-drives leases a
crash left behind and fires due timers. Delivery is at least once; attempt tokens make the
effect exactly once (see docs/stitch-operations.md).

A webhook that never reached a worker (connection refused or reset, no answer in time) is
sent again after ``backoff`` (0.2, 0.4, 0.8 s, jittered) with the same attempt and token
before the node fails; a worker that answered (non-2xx, a redirect) or a target the policy
refuses fails the node at once: trying again would get the same answer. At most
``sends_per_host`` webhooks are in flight to one host and port; the rest queue in the pool.

Targets follow :mod:`webhooks`: address literals are checked before sending, host names by
the resolver the connection uses; redirects are not followed; of an error answer only a
short excerpt without control characters is kept (it becomes the node's error).

A webhook's outbox row is leased to the process sending it. While this process still sends
it (waiting for a connection, for the worker's answer, or between re-sends), the reconciler
renews that lease once half of it has passed, so the reconciler of another process re-sends
only what a dead (or stalled for half a lease) sender left behind.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from agentloom.stitch import metrics
from agentloom.stitch.engine import Engine, Sending
from agentloom.stitch.webhooks import EXCERPT_BYTES, TargetRefused, WebhookPolicy, excerpt, shown_url

log = logging.getLogger(__name__)
DELIVERY_BACKOFF = (0.2, 0.4, 0.8)  # seconds before each re-send of an undelivered webhook
SENDS_PER_HOST = 64  # webhooks in flight to one worker host:port
MARK_SENT_DELAY = 0.2  # seconds a delivered webhook waits to be marked sent, with others


@dataclass(frozen=True)
class Delivery:
    """How one POST went: ``reason`` is None when the worker accepted it."""

    reason: str | None = None
    status: int | None = None  # the worker's HTTP status, when it answered
    again: bool = False  # the webhook may not have arrived: worth sending again

    @property
    def cause(self) -> str:
        """Why an undelivered webhook failed, as the metrics label it."""
        if self.status is not None:
            return "worker_answered"
        return "unreachable" if self.again else "refused"


class Dispatcher:
    def __init__(
        self,
        engine: Engine,
        *,
        timeout: float = 10.0,
        poll_interval: float = 1.0,
        webhooks: WebhookPolicy | None = None,
        backoff: tuple[float, ...] = DELIVERY_BACKOFF,
        sends_per_host: int = SENDS_PER_HOST,
    ) -> None:
        if sends_per_host < 1:
            raise ValueError(f"sends_per_host is {sends_per_host}; it must be at least 1")
        self.engine = engine
        self.backoff = backoff
        self.sends_per_host = sends_per_host
        self.webhooks = webhooks or engine.webhooks
        self._literal_checks: dict[str, str | None] = {}  # url -> why its address literal is refused
        self.timeout = timeout
        self.poll_interval = poll_interval
        self._sent: list[tuple[Sending, int | None]] = []  # with the HTTP status the worker answered
        self._sending: dict[int, tuple[Sending, float]] = {}  # outbox id -> (being sent, renew its lease at)
        self._flush_due = anyio.Event()
        self._tasks: TaskGroup | None = None
        self._client: aiohttp.ClientSession | None = None

    async def run(self, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled: the reconciler loop, the sent-marker, and every send."""
        # aiohttp rather than httpx here: it costs about a third of the CPU per request, and
        # sending webhooks is most of what this process does.
        # No total: time queued for a pool slot (sends_per_host) must not count against the
        # worker; connecting and each read get the timeout instead.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=self.timeout)
        connector = aiohttp.TCPConnector(
            limit=max(256, self.sends_per_host), limit_per_host=self.sends_per_host, resolver=self.webhooks.resolver()
        )
        async with (
            aiohttp.ClientSession(timeout=timeout, connector=connector) as client,
            anyio.create_task_group() as tg,
        ):
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
        """One round: renew the leases of webhooks still being sent, re-send expired leases,
        then fire due timers (deadlines, retry backoffs)."""
        await self._renew_leases()
        due = await anyio.to_thread.run_sync(self.engine.claim_due)
        for sending in due:
            log.info("re-sending %s/%s attempt %d (its lease ran out)", sending.run_id, sending.key, sending.attempt)
        self.submit(due)
        fired = await anyio.to_thread.run_sync(self.engine.fire_due)
        self.submit(fired)
        return len(due) + len(fired)

    async def _renew_leases(self) -> None:
        now = time.time()
        due = [sending for sending, renew_at in self._sending.values() if renew_at <= now]
        if not due:
            return
        try:
            await anyio.to_thread.run_sync(self.engine.renew_leases, due)
        except Exception:  # tried again next round; a lease that runs out meanwhile means a repeat
            log.warning("could not renew the leases of %d webhooks being sent", len(due), exc_info=True)
            return
        renew_at = now + self.engine.lease_seconds / 2
        for sending in due:
            if sending.outbox_id in self._sending:
                self._sending[sending.outbox_id] = (sending, renew_at)

    async def _reconcile_forever(self) -> None:
        while True:
            metrics.pool_in_use(self.engine.db.connections_in_use())  # sampled: no work per checkout
            try:
                await self.reconcile_once()
            except Exception:  # the database may be restarting; try again next round
                log.exception("reconciler round failed")
            await anyio.sleep(self.poll_interval)

    async def _mark_sent_forever(self) -> None:
        while True:
            await self._flush_due.wait()
            # Marks only matter when a lease runs out (30 s), so they wait a little and go in
            # batches: one write transaction per batch, not one per webhook competing with
            # the callback that usually follows the webhook within a millisecond.
            await anyio.sleep(MARK_SENT_DELAY)
            self._flush_due = anyio.Event()
            batch, self._sent = self._sent, []
            try:
                await anyio.to_thread.run_sync(self.engine.mark_sent, batch)
            except Exception:  # unmarked rows are re-sent after their lease: harmless duplicates
                log.exception("could not mark %d dispatches sent", len(batch))

    async def _send(self, sending: Sending) -> None:
        # Its lease was taken when it was committed or claimed, just before this.
        self._sending[sending.outbox_id] = (sending, time.time() + self.engine.lease_seconds / 2)
        try:
            await self._deliver(sending)
        finally:
            self._sending.pop(sending.outbox_id, None)

    async def _deliver(self, sending: Sending) -> None:
        started = time.perf_counter()
        tries = 0
        while True:
            tries += 1
            delivery = await self._post(sending)
            if delivery.reason is None:
                metrics.delivered(time.perf_counter() - started)
                self._sent.append((sending, delivery.status))
                self._flush_due.set()
                return
            if not delivery.again or tries > len(self.backoff):
                break
            # Jitter spreads a fan-out's re-sends, so a worker with a small listen backlog
            # is not hit by all of them in the same millisecond again.
            delay = self.backoff[tries - 1] * random.uniform(0.75, 1.25)
            log.info(
                "webhook %s/%s attempt %d not delivered (%s); sending again in %.2f s",
                sending.run_id,
                sending.key,
                sending.attempt,
                delivery.reason,
                delay,
            )
            await anyio.sleep(delay)
            metrics.resent()
        metrics.delivery_failed(delivery.cause, time.perf_counter() - started)
        reason = delivery.reason
        if tries > 1:
            reason = f"{reason}; gave up after {tries} tries"
        log.warning("dispatch of %s/%s failed: %s", sending.run_id, sending.key, reason)
        _, more = await anyio.to_thread.run_sync(
            self.engine.dispatch_failed,
            sending.outbox_id,
            sending.run_id,
            sending.key,
            sending.attempt,
            reason,
            delivery.status,
        )
        self.submit(more)

    async def _post(self, sending: Sending) -> Delivery:
        """Deliver one webhook once. (The connector bounds concurrency per host.)"""
        assert self._client is not None
        where = shown_url(sending.url)
        refused = self._literal_problem(sending.url)
        if refused:
            return Delivery(
                f"webhook to {where} refused: {refused}; allow it with STITCH_WEBHOOK_ALLOW if that is intended"
            )
        try:
            async with self._client.post(sending.url, json=sending.payload, allow_redirects=False) as response:
                if 200 <= response.status < 300:
                    await response.read()
                    return Delivery(status=response.status)
                worker = f"worker at {where} answered HTTP {response.status}"
                if 300 <= response.status < 400:
                    location = excerpt(response.headers.get("Location", ""), 120) or "nowhere"
                    return Delivery(
                        f"{worker}, a redirect to {location}: redirects are not followed; "
                        "set data.webhookUrl to the final URL",
                        response.status,
                    )
                return Delivery(f"{worker}: {excerpt(await response.content.read(EXCERPT_BYTES))}", response.status)
        except TargetRefused as exc:
            return Delivery(f"webhook to {where} refused: {exc}")
        except TimeoutError:
            return Delivery(f"worker at {where} did not answer within {self.timeout:g} s", again=True)
        except (aiohttp.ClientConnectionError, OSError) as exc:
            if isinstance(exc.__cause__, TargetRefused):
                return Delivery(f"webhook to {where} refused: {exc.__cause__}")
            return Delivery(f"worker at {where} is unreachable ({type(exc).__name__}: {excerpt(str(exc))})", again=True)
        except aiohttp.ClientError as exc:  # a malformed answer, an unusable URL: the same next time
            return Delivery(f"worker at {where} could not be sent to ({type(exc).__name__}: {excerpt(str(exc))})")

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
