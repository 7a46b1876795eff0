"""Live updates: the events the engine records, pushed to subscribers as server-sent events.

The feed polls the events table (one query per process every ``interval`` seconds, only while
someone listens) instead of hooking the engine, so an event committed by any server process on
the database reaches a subscriber connected to any other, on SQLite and PostgreSQL alike.

Event ids come from a sequence, and on PostgreSQL a transaction that took a lower id may commit
after one that took a higher id. Reading ``id > highest seen`` alone would skip such a late
event for good, so an id missing below the highest seen is a *gap*, looked for again in every
poll for ``GAP_GRACE`` seconds (a rolled-back transaction leaves a gap that never fills; it is
then forgotten). SQLite has one writer at a time: its ids arrive in order and leave no gaps.

A subscriber that cannot keep up (its buffer of ``BUFFER`` messages is full) is dropped: its
stream ends, and a client reconnecting with the last id it saw (``after``, or the
``Last-Event-ID`` header) loses nothing, because a run's stream starts with the events after it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from sqlalchemy import Select, func, or_, select

from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import events, runs
from agentloom.stitch.replies import as_reply

log = logging.getLogger(__name__)

INTERVAL = 0.1  # seconds between polls while someone listens
GAP_GRACE = 5.0  # seconds a missing event id is looked for again
BUFFER = 2000  # messages a slow subscriber may lag behind before it is dropped
BATCH = 2000  # event rows read per poll at most
KEEPALIVE = 15.0  # seconds between comments on an idle stream (proxies close silent connections)
MAX_GAPS = 10_000
STARTED_WITHIN = 10.0  # seconds a new stream waits for the poller to run before answering 503

_EVENT_COLUMNS = (
    events.c.id,
    events.c.run_id,
    events.c.node_key,
    events.c.status,
    events.c.attempt,
    events.c.at,
    events.c.error,
    events.c.summary,
)
_RUN_COLUMNS = (
    runs.c.status.label("run_status"),
    runs.c.flow_id,
    runs.c.flow_version,
    runs.c.created_at,
    runs.c.updated_at,
)


@dataclass(frozen=True)
class Message:
    """One server-sent event: its type, id (an event id, or none) and JSON data."""

    event: str
    data: dict[str, Any]
    id: int | None = None

    def encode(self) -> bytes:
        head = f"id: {self.id}\n" if self.id is not None else ""
        return f"{head}event: {self.event}\ndata: {json.dumps(self.data, separators=(',', ':'))}\n\n".encode()


def node_message(row: Any) -> Message:
    """A run's event as the ``node`` message of its run stream."""
    data = as_reply(
        {key: row[key] for key in ("id", "run_id", "node_key", "status", "attempt", "at", "error", "summary")}
    )
    data["run_status"] = row["run_status"]
    return Message("node", data, id=row["id"])


def run_message(row: Any) -> Message:
    """A run's summary as the ``run`` message of the run-list stream."""
    return Message(
        "run",
        as_reply(
            {
                "id": row["run_id"],
                "flow_id": row["flow_id"],
                "flow_version": row["flow_version"],
                "status": row["run_status"],
                "created_at": row["created_at"],
                "updated_at": row["updated_at"],
            }
        ),
    )


@dataclass(eq=False)
class Subscription:
    """What one stream wants: one run's events, or run changes (of one flow, or all)."""

    run_id: str | None = None
    flow_id: str | None = None
    send: MemoryObjectSendStream[Message] = field(init=False)
    receive: MemoryObjectReceiveStream[Message] = field(init=False)

    def __post_init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[Message](BUFFER)

    def offer(self, message: Message) -> bool:
        """Queue ``message``; False when the subscriber is too far behind (it is then dropped)."""
        try:
            self.send.send_nowait(message)
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True


def _joined() -> Select[Any]:
    return select(*_EVENT_COLUMNS, *_RUN_COLUMNS).join(runs, runs.c.id == events.c.run_id)


class EventFeed:
    """One per server process: polls new events while anyone is subscribed and hands each to
    the subscriptions it concerns."""

    def __init__(self, db: Database, interval: float = INTERVAL) -> None:
        self.db = db
        self.interval = interval
        self.subscriptions: set[Subscription] = set()
        self.highest: int | None = None  # the highest event id seen; None until the first poll
        self.gaps: dict[int, float] = {}  # a missing id below ``highest`` -> when it was first missed
        self._wake = anyio.Event()
        self.primed = anyio.Event()  # set once ``highest`` is read after the feed (re)started

    # -- subscribers ---------------------------------------------------------------------
    def subscribe(self, run_id: str | None = None, flow_id: str | None = None) -> Subscription:
        subscription = Subscription(run_id=run_id, flow_id=flow_id)
        self.subscriptions.add(subscription)
        self._wake.set()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscriptions.discard(subscription)
        subscription.send.close()
        subscription.receive.close()

    async def started(self) -> None:
        """Wait until the poller runs for the subscriptions there are (call it after subscribing):
        from then on an event it has not delivered is one a replay read now includes, or one it
        will deliver. TimeoutError when the database cannot be read within STARTED_WITHIN seconds."""
        with anyio.fail_after(STARTED_WITHIN):
            await self.primed.wait()

    def replay(self, run_id: str, after: int) -> list[Message]:
        """The run's events after ``after``, oldest first (what a stream sends before live ones);
        read it after :meth:`started`."""
        query = _joined().where(events.c.run_id == run_id, events.c.id > after).order_by(events.c.id)
        with self.db.reading() as conn:
            return [node_message(row) for row in conn.execute(query).mappings()]

    # -- the poller ----------------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if not self.subscriptions:
                # Idle: forget where it was, so waking up does not read every event since.
                self.highest, self.gaps, self.primed, self._wake = None, {}, anyio.Event(), anyio.Event()
                await self._wake.wait()
            try:
                rows = await anyio.to_thread.run_sync(self.poll)
            except Exception:
                log.warning("live updates: reading new events failed; trying again", exc_info=True)
                rows = []
            if self.highest is not None:
                self.primed.set()
            self.deliver(rows)
            await anyio.sleep(self.interval)

    def poll(self, now: float | None = None) -> list[Any]:
        """New events (and gaps that filled) since the last poll, in id order."""
        now = time.monotonic() if now is None else now
        with self.db.reading() as conn:
            if self.highest is None:  # start from what exists: subscribers replay the past themselves
                self.highest = conn.execute(select(func.coalesce(func.max(events.c.id), 0))).scalar_one()
                return []
            self.gaps = {gap: since for gap, since in self.gaps.items() if now - since < GAP_GRACE}
            wanted = events.c.id > self.highest
            if self.gaps:
                wanted = or_(wanted, events.c.id.in_(sorted(self.gaps)))
            rows = list(conn.execute(_joined().where(wanted).order_by(events.c.id).limit(BATCH)).mappings())
        for row in rows:
            self.gaps.pop(row["id"], None)
            if row["id"] > self.highest + 1:
                missing = range(self.highest + 1, min(row["id"], self.highest + 1 + MAX_GAPS))
                self.gaps.update(dict.fromkeys(missing, now))
            self.highest = max(self.highest, row["id"])
        return rows

    def deliver(self, rows: list[Any]) -> None:
        if not rows or not self.subscriptions:
            return
        by_run: dict[str, list[Subscription]] = {}
        listing: list[Subscription] = []
        for subscription in self.subscriptions:
            if subscription.run_id is not None:
                by_run.setdefault(subscription.run_id, []).append(subscription)
            else:
                listing.append(subscription)
        dropped: set[Subscription] = set()
        changed: dict[str, Any] = {}  # run id -> its last row in this batch: one run message each
        for row in rows:
            for subscription in by_run.get(row["run_id"], ()):
                if subscription not in dropped and not subscription.offer(node_message(row)):
                    dropped.add(subscription)
            changed[row["run_id"]] = row
        for row in changed.values():
            message = run_message(row)
            for subscription in listing:
                if subscription.flow_id in (None, row["flow_id"]) and subscription not in dropped:
                    if not subscription.offer(message):
                        dropped.add(subscription)
        for subscription in dropped:
            log.info("live updates: a subscriber fell %d messages behind and was dropped; it may reconnect", BUFFER)
            self.unsubscribe(subscription)


async def stream(feed: EventFeed, subscription: Subscription, first: list[Message]) -> AsyncIterator[bytes]:
    """The bytes of one SSE response: ``first``, then live messages (a run's events once each,
    in case a live one was also replayed), a keep-alive comment when idle."""
    sent: set[int] = {m.id for m in first if m.id is not None}
    try:
        yield b"retry: 1000\n\n"
        for message in first:
            yield message.encode()
        while True:
            with anyio.move_on_after(KEEPALIVE):
                try:
                    message = await subscription.receive.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return  # dropped for lagging: the client reconnects with its last id
                if message.id is not None:
                    if message.id in sent:
                        continue
                    sent.add(message.id)
                yield message.encode()
                continue
            yield b": keep-alive\n\n"
    finally:
        feed.unsubscribe(subscription)


def last_event_id(after: int | None, header: str | None) -> int:
    """Where a run stream starts: ``after``, else the ``Last-Event-ID`` a reconnecting
    EventSource sends, else the beginning (0). A header that is not a count (or too large
    for one) is ignored."""
    if after is not None:
        return after
    text = (header or "").strip()
    if text.isascii() and text.isdigit() and len(text) <= 18:  # a count a BIGINT holds; Unicode digits are not
        return int(text)
    return 0


__all__ = ["EventFeed", "Message", "Subscription", "last_event_id", "stream"]
