"""Python ``logging`` records from agentloom's loggers, sent to the MCP clients that ask for them.

Why: a client (and the person in front of it) only sees what the server says on the
protocol; stderr is a file nobody reads. MCP's logging utility (``logging/setLevel`` and
``notifications/message``) carries the server's own log lines to the client, so the
``agentloom`` loggers are relayed there. stderr logging is untouched: every line still
goes there, and stdout still carries only the protocol.

Who gets what:

- Handshake-era connections (protocol 2025-11-25 and before) opt in with
  ``logging/setLevel``. Until a connection has set a level it gets nothing. The spec
  lets a server send at a default level of its own, but many clients show these
  notifications to the user, stderr already has every line, and the 2026-07-28
  revision forbids unrequested log notifications outright; so the server waits to be
  asked, on every revision alike.
- 2026-07-28 requests opt in one by one, with ``_meta["io.modelcontextprotocol/logLevel"]``
  (that revision has no ``logging/setLevel`` and no connection-wide delivery).
- A record emitted while a request is being handled (its task, tasks and worker
  threads started from it) belongs to that request: it goes to that request's client
  only, on that request's own stream (the POST's SSE stream over HTTP), and before the
  request's answer. Other clients never see it.
- A record emitted outside any request (background work: the embedding model being
  prepared, a breaker opening) goes to every handshake-era connection that set a
  level low enough, once each, on its standalone channel (stdout over stdio, the GET
  SSE stream over HTTP); never to several streams of one client.
- What is sent is the formatted message and the logger name. Tracebacks are not: the
  spec forbids internal details in log notifications (the exception's type is named).

Safety: :meth:`ClientLogRelay.offer` (the ``logging.Handler``'s ``emit``) never blocks
and never awaits: it hands the record to the event loop (thread-safely when it runs in
another thread), which puts it in a bounded queue drained by one task. A full queue
drops records (the spec asks servers to rate-limit; the count is reported on stderr).
Records emitted while the relay is sending, or while it is formatting a record, or
by this module's own logger, are not relayed, so a log written while sending a log
cannot recurse.

Levels: a client that asks for more detail than the server logs (``debug`` while the
server runs at ``INFO``) gets it: the ``agentloom`` logger is lowered while some
client needs it, and a filter on the other handlers keeps stderr at its configured
level meanwhile.

SDK internals relied on: ``ServerSession._connection`` (the per-connection
``mcp.server.connection.Connection`` the request arrived on; the request context does
not expose it otherwise) to keep one level per connection, reach its standalone
channel (``Connection.notify``) and forget it when it closes (``Connection.exit_stack``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    LOG_LEVEL_META_KEY,
    EmptyResult,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    RequestId,
    SetLevelRequestParams,
)
from mcp_types.jsonrpc import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

LOGGER_NAME = "agentloom"
"""Records of this logger and its children are relayed."""

THRESHOLDS: dict[str, int] = {
    "debug": 1,
    "info": logging.INFO,
    "notice": 25,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": 60,
    "emergency": 70,
}
"""Each MCP level (RFC 5424 names) and the lowest Python level it lets through."""

QUEUE_SIZE = 1000
SEND_TIMEOUT = 5.0  # one notification stuck longer than this (a client not reading) is given up
FLUSH_TIMEOUT = 5.0  # how long a request's answer waits for its own log lines to be sent
MAX_MESSAGE = 4000

log = logging.getLogger(__name__)  # under "agentloom" but never relayed: it reports on the relay itself


def mcp_level(levelno: int) -> str:
    """The MCP level of a Python record."""
    for name in ("emergency", "alert", "critical", "error", "warning", "notice", "info"):
        if levelno >= THRESHOLDS[name]:
            return name
    return "debug"


def record_text(record: logging.LogRecord) -> str:
    """The formatted message, without the traceback (the exception's type is named)."""
    try:
        text = record.getMessage()
    except Exception:
        text = str(record.msg)
    if record.exc_info and record.exc_info[0] is not None:
        text = f"{text} [{record.exc_info[0].__name__}]"
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


@dataclass(eq=False)
class _Scope:
    """The request a record belongs to: set for as long as the request is handled."""

    relay: ClientLogRelay
    session: Any  # mcp.server.session.ServerSession of this request
    request_id: RequestId
    connection: Connection | None
    modern_threshold: int | None  # 2026-07-28: the request's own opt-in (None: it did not opt in)
    modern: bool
    pending: int = 0  # relayed records not sent yet
    idle: anyio.Event | None = None  # set when pending drops to 0 while the request waits for it


@dataclass(frozen=True, eq=False)
class _Delivery:
    send: Callable[[], Awaitable[None]]
    scope: _Scope | None


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("agentloom_log_scope", default=None)
_SENDING: contextvars.ContextVar[bool] = contextvars.ContextVar("agentloom_log_sending", default=False)
_formatting = threading.local()


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    connection = getattr(ctx.session, "_connection", None)  # see the module docstring
    return connection if isinstance(connection, Connection) else None


class _RelayHandler(logging.Handler):
    def __init__(self, relay: ClientLogRelay) -> None:
        super().__init__(logging.NOTSET)
        self.relay = relay

    def emit(self, record: logging.LogRecord) -> None:
        self.relay.offer(record)


class _StderrGuard(logging.Filter):
    """Drops ``agentloom`` records below the configured level while the logger is lowered for a client."""

    def __init__(self) -> None:
        super().__init__()
        self.floor = logging.NOTSET

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name == LOGGER_NAME or record.name.startswith(LOGGER_NAME + ".")
        return not (ours and record.levelno < self.floor)


class _LevelFloor:
    """Lowers the ``agentloom`` logger while some client wants records below its level (loop thread only)."""

    def __init__(self) -> None:
        self._needs: Counter[int] = Counter()
        self._saved: int | None = None  # the logger's own level before lowering; None while not lowered
        self._guard = _StderrGuard()
        self._guarded: list[logging.Handler] = []

    def need(self, threshold: int) -> None:
        self._needs[threshold] += 1
        self._apply()

    def release(self, threshold: int) -> None:
        self._needs[threshold] -= 1
        if self._needs[threshold] <= 0:
            del self._needs[threshold]
        self._apply()

    def reset(self) -> None:
        self._needs.clear()
        self._apply()

    def _apply(self) -> None:
        logger = logging.getLogger(LOGGER_NAME)
        wanted = min(self._needs) if self._needs else None
        if self._saved is None:
            if wanted is None or wanted >= logger.getEffectiveLevel():
                return
            self._saved = logger.level
            self._guard.floor = logger.getEffectiveLevel()
            self._guarded = [h for h in _handlers_above(logger) if not isinstance(h, _RelayHandler)]
            for handler in self._guarded:
                handler.addFilter(self._guard)
        elif wanted is None or wanted >= self._guard.floor:
            logger.setLevel(self._saved)
            for handler in self._guarded:
                handler.removeFilter(self._guard)
            self._saved, self._guarded = None, []
            return
        if logger.level != wanted:
            logger.setLevel(wanted)


def _handlers_above(logger: logging.Logger) -> list[logging.Handler]:
    handlers: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers.extend(current.handlers)
        current = current.parent if current.propagate else None
    return handlers


class ClientLogRelay:
    """Relays ``agentloom`` log records to MCP clients; one per server (see the module docstring)."""

    def __init__(self) -> None:
        self._levels: dict[Connection, str] = {}  # handshake-era connections that called logging/setLevel
        self._handler = _RelayHandler(self)
        self._floor = _LevelFloor()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._queue: MemoryObjectSendStream[_Delivery] | None = None
        self._dropped = 0
        self._users = 0

    # -- lifetime ------------------------------------------------------------------
    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Relay while the server runs (entered from the server's lifespan)."""
        if self._loop is not None:  # a second lifespan in this process: the first one relays for both
            self._users += 1
            try:
                yield
            finally:
                self._users -= 1
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on asyncio: the relay needs call_soon_threadsafe; serve without it
            log.debug("client logging disabled: not running on an asyncio event loop")
            yield
            return
        send, receive = anyio.create_memory_object_stream[_Delivery](QUEUE_SIZE)
        self._loop, self._loop_thread, self._queue = loop, threading.get_ident(), send
        logging.getLogger(LOGGER_NAME).addHandler(self._handler)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump, receive)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            logging.getLogger(LOGGER_NAME).removeHandler(self._handler)
            self._loop = self._loop_thread = self._queue = None
            send.close()
            self._levels.clear()
            self._floor.reset()

    # -- protocol ------------------------------------------------------------------
    async def set_level(self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        """``logging/setLevel``: this connection gets records at ``params.level`` and above from now on."""
        connection = connection_of(ctx)
        if connection is None:
            raise MCPError(
                INTERNAL_ERROR, "logging/setLevel: this transport has no connection to send log messages on."
            )
        previous = self._levels.get(connection)
        self._levels[connection] = params.level
        self._floor.need(THRESHOLDS[params.level])
        if previous is None:
            connection.exit_stack.callback(self._forget, connection)
        else:
            self._floor.release(THRESHOLDS[previous])
        return EmptyResult()

    def _forget(self, connection: Connection) -> None:
        level = self._levels.pop(connection, None)
        if level is not None:
            self._floor.release(THRESHOLDS[level])

    async def scope_requests(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """``ServerMiddleware``: records emitted while a request is handled belong to it."""
        if ctx.request_id is None:
            return await call_next(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        requested = (ctx.meta or {}).get(LOG_LEVEL_META_KEY) if modern else None
        threshold = THRESHOLDS.get(requested) if isinstance(requested, str) else None
        scope = _Scope(self, ctx.session, ctx.request_id, connection_of(ctx), threshold, modern)
        token = _SCOPE.set(scope)
        if threshold is not None:
            self._floor.need(threshold)
        try:
            try:
                result = await call_next(ctx)
            except Exception:
                await self._flush(scope)  # the error answer too comes after the request's log lines
                raise
            await self._flush(scope)
            return result
        finally:
            _SCOPE.reset(token)
            if threshold is not None:
                self._floor.release(threshold)

    async def _flush(self, scope: _Scope) -> None:
        if scope.pending:
            scope.idle = anyio.Event()
            with anyio.move_on_after(FLUSH_TIMEOUT):
                await scope.idle.wait()

    # -- records -------------------------------------------------------------------
    def offer(self, record: logging.LogRecord) -> None:
        """Take a record from any thread; never blocks (this is the handler's ``emit``)."""
        loop = self._loop
        if loop is None or _SENDING.get() or getattr(_formatting, "active", False) or record.name == log.name:
            return
        scope = _SCOPE.get()
        if scope is not None and scope.relay is not self:
            return  # a request of another server in this process
        _formatting.active = True
        try:
            entry = (record.levelno, record.name, record_text(record), scope)
        finally:
            _formatting.active = False
        if threading.get_ident() == self._loop_thread:
            self._route(entry)
        else:
            try:
                loop.call_soon_threadsafe(self._route, entry)
            except RuntimeError:  # the loop is closing: nobody is listening any more
                pass

    def _route(self, entry: tuple[int, str, str, _Scope | None]) -> None:
        levelno, name, text, scope = entry
        params = LoggingMessageNotificationParams(level=mcp_level(levelno), logger=name, data=text)  # type: ignore[arg-type]
        if scope is not None:
            if scope.modern:
                threshold = scope.modern_threshold
            else:
                level = self._levels.get(scope.connection) if scope.connection is not None else None
                threshold = THRESHOLDS[level] if level is not None else None
            if threshold is not None and levelno >= threshold:
                self._enqueue(_Delivery(_request_sender(scope, params), scope))
            return
        for connection, level in list(self._levels.items()):
            if levelno >= THRESHOLDS[level]:
                self._enqueue(_Delivery(_connection_sender(connection, params), None))

    def _enqueue(self, delivery: _Delivery) -> None:
        if self._queue is None:
            return
        try:
            self._queue.send_nowait(delivery)
        except anyio.WouldBlock:
            self._dropped += 1
            return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return
        if delivery.scope is not None:
            delivery.scope.pending += 1

    async def _pump(self, receive: MemoryObjectReceiveStream[_Delivery]) -> None:
        _SENDING.set(True)  # this task only sends: whatever it logs is not relayed again
        async with receive:
            async for delivery in receive:
                with anyio.move_on_after(SEND_TIMEOUT):
                    try:
                        await delivery.send()
                    except Exception as exc:
                        log.debug("log notification not delivered: %r", exc)
                scope = delivery.scope
                if scope is not None:
                    scope.pending -= 1
                    if scope.pending <= 0 and scope.idle is not None:
                        scope.idle.set()
                if self._dropped and receive.statistics().current_buffer_used == 0:
                    log.warning(
                        "client logging: %d log lines were not sent to clients (more than %d waiting)",
                        self._dropped,
                        QUEUE_SIZE,
                    )
                    self._dropped = 0


def _request_sender(scope: _Scope, params: LoggingMessageNotificationParams) -> Callable[[], Awaitable[None]]:
    async def send() -> None:
        await scope.session.send_notification(LoggingMessageNotification(params=params), scope.request_id)

    return send


def _connection_sender(
    connection: Connection, params: LoggingMessageNotificationParams
) -> Callable[[], Awaitable[None]]:
    payload = params.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def send() -> None:
        await connection.notify("notifications/message", payload)

    return send
