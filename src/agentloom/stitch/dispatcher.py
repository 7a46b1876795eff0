"""Sends the outbox: right after each commit, and from a reconciler that re-drives leases a
crash left behind and fires due timers. Delivery is at least once; attempt tokens make the
effect exactly once (see docs/stitch-operations.md).

A webhook that never reached a worker (connection refused or reset, no answer in time) is
sent again after ``backoff`` (0.2, 0.4, 0.8 s, jittered) with the same attempt and token
before the node fails; a worker that answered (non-2xx, a redirect) or a target the policy
refuses fails the node at once: trying again would get the same answer. At most
``sends_per_host`` webhooks are in flight to one host and port (:class:`HostSlots`); the
rest wait for a slot, and that wait does not count against the worker.

One send (connecting, the request, the answer's status and headers, then the answer's body)
ends within ``timeout``. The worker has accepted once a 2xx status arrived: what happens to its
body after that (too slow, too long) only closes the connection, it never sends the webhook
again. At most ``max_response_bytes`` of an answer are read; beyond that the connection is
closed (the body is not used beyond an excerpt).

Targets follow :mod:`webhooks`: the host is judged as the HTTP client reads it (IDNA,
fullwidth forms folded), address literals before sending, host names by the resolver the
connection uses; redirects are not followed; of an error answer only a short excerpt without
control characters is kept (it becomes the node's error).

A webhook's outbox row is leased to the process sending it. While this process still sends
it (waiting for a connection, for the worker's answer, or between re-sends), the reconciler
renews that lease once half of it has passed, so the reconciler of another process re-sends
only what a dead (or stalled for half a lease) sender left behind.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from yarl import URL

from agentloom.stitch import metrics
from agentloom.stitch.engine import Engine, Sending
from agentloom.stitch.webhooks import (
    EXCERPT_BYTES,
    MAX_RESPONSE_BYTES,
    TargetRefused,
    WebhookPolicy,
    excerpt,
    shown_url,
)

log = logging.getLogger(__name__)
DELIVERY_BACKOFF = (0.2, 0.4, 0.8)  # seconds before each re-send of an undelivered webhook
SENDS_PER_HOST = 64  # webhooks in flight to one worker host:port
SENDS_IN_ALL = 256  # webhooks in flight from one process
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


@dataclass(frozen=True)
class Target:
    """A webhook URL as the HTTP client reads it, and why the policy refuses its address literal."""

    url: URL | None  # None: not a URL the client can send to
    slot: tuple[str, int]  # host and port, for :class:`HostSlots`
    refused: str | None = None


class HostSlots:
    """At most ``per_host`` sends in flight to one host and port, and ``total`` in all. Kept here
    rather than in the connection pool, so that waiting for a slot is not part of a send's time."""

    def __init__(self, per_host: int, total: int) -> None:
        self.per_host = per_host
        self.total = anyio.Semaphore(total)
        self._hosts: dict[tuple[str, int], tuple[anyio.Semaphore, int]] = {}  # slot -> (semaphore, users)

    @asynccontextmanager
    async def slot(self, key: tuple[str, int]) -> AsyncIterator[None]:
        semaphore, users = self._hosts.get(key) or (anyio.Semaphore(self.per_host), 0)
        self._hosts[key] = (semaphore, users + 1)
        try:
            async with semaphore, self.total:
                yield
        finally:
            semaphore, users = self._hosts[key]
            if users == 1:
                del self._hosts[key]
            else:
                self._hosts[key] = (semaphore, users - 1)


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
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if sends_per_host < 1:
            raise ValueError(f"sends_per_host is {sends_per_host}; it must be at least 1")
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes is {max_response_bytes}; it must be at least 1")
        self.engine = engine
        self.backoff = backoff
        self.sends_per_host = sends_per_host
        self.max_response_bytes = max_response_bytes
        self.webhooks = webhooks or engine.webhooks
        self._targets: dict[str, Target] = {}  # url -> as the client reads it
        self._slots = HostSlots(sends_per_host, max(SENDS_IN_ALL, sends_per_host))
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
        # The pool has no limits of its own: HostSlots bounds the sends before they reach it,
        # and each send's own deadline (_post) bounds connecting, the answer and its body.
        timeout = aiohttp.ClientTimeout(total=None)
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, resolver=self.webhooks.resolver())
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
            except Exception as exc:  # marking is idempotent: the batch goes with the next one
                log.warning("could not mark %d dispatches sent (%s); trying again", len(batch), exc)
                self._sent = batch + self._sent
                self._flush_due.set()

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
        """Deliver one webhook once, within ``timeout`` once a slot for its host is free."""
        target = self._target(sending.url)
        where = shown_url(sending.url)
        if target.refused:
            return Delivery(
                f"webhook to {where} refused: {target.refused}; allow it with STITCH_WEBHOOK_ALLOW if that is intended"
            )
        if target.url is None:
            return Delivery(f"worker at {where} could not be sent to (not a URL the HTTP client can use)")
        async with self._slots.slot(target.slot):
            return await self._post_within(target.url, sending, where, anyio.current_time() + self.timeout)

    async def _post_within(self, url: URL, sending: Sending, where: str, deadline: float) -> Delivery:
        assert self._client is not None
        try:
            with anyio.fail_after(deadline - anyio.current_time()):
                response = await self._client.post(url, json=sending.payload, allow_redirects=False)
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
        # The worker answered: from here on the webhook is not sent again, whatever its body does.
        try:
            status = response.status
            if 200 <= status < 300:
                await self._read_body(response, self.max_response_bytes, deadline)
                return Delivery(status=status)
            worker = f"worker at {where} answered HTTP {status}"
            if 300 <= status < 400:
                location = excerpt(response.headers.get("Location", ""), 120) or "nowhere"
                return Delivery(
                    f"{worker}, a redirect to {location}: redirects are not followed; "
                    "set data.webhookUrl to the final URL",
                    status,
                )
            body = await self._read_body(response, min(EXCERPT_BYTES, self.max_response_bytes), deadline)
            return Delivery(f"{worker}: {excerpt(body)}", status)
        finally:
            response.release()

    @staticmethod
    async def _read_body(response: aiohttp.ClientResponse, limit: int, deadline: float) -> bytes:
        """At most ``limit`` bytes of the answer, read before ``deadline``. An answer not read to its
        end in time or within the limit closes the connection (a reused one would carry its rest)."""
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            while size < limit:
                chunk = await response.content.read(limit - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        if not response.content.at_eof():
            response.close()
        return b"".join(chunks)

    def _target(self, url: str) -> Target:
        """The URL as aiohttp reads it, with the literal-address check (address literals never
        reach the resolver), cached per URL."""
        try:
            return self._targets[url]
        except KeyError:
            pass
        try:
            parsed = URL(url)
            host = parsed.host
            target = Target(parsed, (host or "", parsed.port or 0), self.webhooks.literal_problem(host))
        except (ValueError, UnicodeError):
            target = Target(None, ("", 0))
        if len(self._targets) > 4096:
            self._targets.clear()
        self._targets[url] = target
        return target
