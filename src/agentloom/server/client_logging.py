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

Levels: which levels a request may get is the SDK's rule (``allowed_log_levels``: on
2026-07-28 the request's own opt-in, on earlier revisions anything, left to
``logging/setLevel``); the messages go out through the SDK's
``ServerSession.send_log_message``, on the request's stream (``related_request_id``) or
the connection's standalone one. A client gets what the server logs: the logger levels
are the server's configuration (``log_level``), never changed at a client's request, so
``debug`` from a client of a server running at ``INFO`` gets ``info`` and above.

The connection a request arrived on (to keep one level per connection, and forget it
when the connection closes) comes from :func:`~agentloom.server.sdk_compat.connection_of`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, get_args

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import EmptyResult, LoggingLevel, RequestId, SetLevelRequestParams
from mcp_types.jsonrpc import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentloom.server.sdk_compat import connection_of

# The SDK marks its logging API deprecated (the 2026-07-28 revision drops logging/setLevel);
# handshake-era clients still use it, and the warning would only repeat that on stderr.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning, module=r"agentloom\.server\.client_logging$")

LOGGER_NAME = "agentloom"
"""Records of this logger and its children are relayed."""

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)
"""The MCP levels (RFC 5424 names), least severe first: the order of the SDK's ``LoggingLevel``."""

PYTHON_LEVELS: dict[LoggingLevel, int] = {
    "info": logging.INFO,
    "notice": 25,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": 60,
    "emergency": 70,
}
"""The lowest Python level of each MCP level above ``debug`` (which takes everything below ``info``)."""

QUEUE_SIZE = 1000
SEND_TIMEOUT = 5.0  # one notification stuck longer than this (a client not reading) is given up
FLUSH_TIMEOUT = 5.0  # how long a request's answer waits for its own log lines to be sent
MAX_MESSAGE = 4000

log = logging.getLogger(__name__)  # under "agentloom" but never relayed: it reports on the relay itself


def mcp_level(levelno: int) -> LoggingLevel:
    """The MCP level of a Python record."""
    for name in reversed(LEVELS[1:]):
        if levelno >= PYTHON_LEVELS[name]:
            return name
    return "debug"


def at_or_above(level: LoggingLevel) -> frozenset[LoggingLevel]:
    """What ``logging/setLevel`` to ``level`` asks for."""
    return frozenset(LEVELS[LEVELS.index(level) :])


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
    session: ServerSession
    request_id: RequestId
    connection: Connection | None
    allowed: frozenset[LoggingLevel] | None  # 2026-07-28: the SDK's answer to the request's opt-in; None: setLevel
    pending: int = 0  # relayed records not sent yet
    idle: anyio.Event | None = None  # set when pending drops to 0 while the request waits for it


@dataclass(frozen=True)
class _Client:
    """A handshake-era connection that called ``logging/setLevel``."""

    allowed: frozenset[LoggingLevel]
    session: ServerSession  # of its logging/setLevel request: sends on the connection's standalone channel


@dataclass(frozen=True)
class _Record:
    level: LoggingLevel
    logger: str
    text: str
    scope: _Scope | None


@dataclass(frozen=True, eq=False)
class _Delivery:
    send: Callable[[], Awaitable[None]]
    scope: _Scope | None


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("agentloom_log_scope", default=None)
_SENDING: contextvars.ContextVar[bool] = contextvars.ContextVar("agentloom_log_sending", default=False)
_formatting = threading.local()


class _RelayHandler(logging.Handler):
    def __init__(self, relay: ClientLogRelay) -> None:
        super().__init__(logging.NOTSET)
        self.relay = relay

    def emit(self, record: logging.LogRecord) -> None:
        self.relay.offer(record)


class ClientLogRelay:
    """Relays ``agentloom`` log records to MCP clients; one per server (see the module docstring)."""

    def __init__(self) -> None:
        self._clients: dict[Connection, _Client] = {}
        self._handler = _RelayHandler(self)
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
            self._clients.clear()

    # -- protocol ------------------------------------------------------------------
    async def set_level(self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        """``logging/setLevel``: this connection gets records at ``params.level`` and above from now on."""
        connection = connection_of(ctx.session)
        if connection is None:
            raise MCPError(
                INTERNAL_ERROR, "logging/setLevel: this transport has no connection to send log messages on."
            )
        if connection not in self._clients:
            connection.exit_stack.callback(self._clients.pop, connection, None)
        self._clients[connection] = _Client(at_or_above(params.level), ctx.session)
        return EmptyResult()

    async def scope_requests(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """``ServerMiddleware``: records emitted while a request is handled belong to it."""
        if ctx.request_id is None:
            return await call_next(ctx)
        # Handshake-era clients choose with logging/setLevel (the SDK allows them every level).
        chosen_per_request = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        allowed = allowed_log_levels(ctx.protocol_version, ctx.meta) if chosen_per_request else None
        scope = _Scope(self, ctx.session, ctx.request_id, connection_of(ctx.session), allowed)
        token = _SCOPE.set(scope)
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
            entry = _Record(mcp_level(record.levelno), record.name, record_text(record), scope)
        finally:
            _formatting.active = False
        if threading.get_ident() == self._loop_thread:
            self._route(entry)
        else:
            try:
                loop.call_soon_threadsafe(self._route, entry)
            except RuntimeError:  # the loop is closing: nobody is listening any more
                pass

    def _route(self, record: _Record) -> None:
        scope = record.scope
        if scope is not None:
            allowed = scope.allowed
            if allowed is None:
                client = self._clients.get(scope.connection) if scope.connection is not None else None
                allowed = client.allowed if client is not None else frozenset()
            if record.level in allowed:
                self._enqueue(_Delivery(_sender(scope.session, record, scope.request_id), scope))
            return
        for client in list(self._clients.values()):
            if record.level in client.allowed:
                self._enqueue(_Delivery(_sender(client.session, record, None), None))

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


def _sender(session: ServerSession, record: _Record, request_id: RequestId | None) -> Callable[[], Awaitable[None]]:
    """Sends ``record`` on the request's own stream (``request_id``) or, without one, the connection's."""

    async def send() -> None:
        await session.send_log_message(record.level, record.text, record.logger, related_request_id=request_id)

    return send
