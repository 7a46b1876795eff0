"""The ASGI layers in front of the Stitch routes: the body size limit, the API key and the
admission of workers' callbacks.

They work on the raw ASGI messages, so a refused request is answered before its body is
read or parsed (a stranger's body is never read at all).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections import deque

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentloom.stitch import console, metrics

log = logging.getLogger(__name__)
PREFIX = "/api/stitch"
CALLBACK_PREFIX = f"{PREFIX}/callback/"


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes (STITCH_MAX_BODY_BYTES)")


class BodyLimit:
    """Refuses a body above ``limit`` bytes before it is parsed: at once when Content-Length
    says so, otherwise as soon as the bytes received pass the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.limit:
                    await self._refuse(scope, send)
                    return
                break
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLarge:  # read outside a route (a route's own reading answers 413 itself)
            if started:
                raise
            await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        response = JSONResponse(
            {"detail": BodyTooLarge(self.limit).detail}, status_code=413, headers={"Connection": "close"}
        )
        await response(scope, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


class RequireKey:
    """With ``STITCH_API_KEY`` set, every path needs the key except the callbacks (their URLs
    are signed), the health check and the console's page and assets (they hold no data; the page
    asks for the key). New endpoints are therefore protected by default."""

    OPEN_PREFIX = CALLBACK_PREFIX
    OPEN_PATHS = frozenset({f"{PREFIX}/health"})

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and not self._open(scope["path"], scope["method"])
            and not self._authorised(scope["headers"])
        ):
            response = JSONResponse(
                {"detail": "missing or wrong API key: send 'Authorization: Bearer <STITCH_API_KEY>'"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _open(self, path: str, method: str) -> bool:
        return (
            path.startswith(self.OPEN_PREFIX)
            or path in self.OPEN_PATHS
            or (method in ("GET", "HEAD") and console.is_page(path))
        )

    def _authorised(self, headers: list[tuple[bytes, bytes]]) -> bool:
        given = b""
        for name, value in headers:
            if name == b"x-api-key":
                given = value.strip()
                break
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                given = value[7:].strip()
        return hmac.compare_digest(given, self.key)


class AllowHeader:
    """A 405's ``Allow`` lists every method the path takes. Each method of a path is its own
    route, and the router answers from the first route that matched the path alone, so on its
    own ``Allow`` would name that one route's method (GET for a path that also takes PUT)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                methods = _methods(scope)
                if methods:
                    headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"allow"]
                    message = {**message, "headers": [*headers, (b"allow", ", ".join(methods).encode())]}
            await send(message)

        await self.app(scope, receive, send_with_allow)


def _methods(scope: Scope) -> list[str]:
    from starlette.routing import Match

    matched = [
        route for route in scope["app"].router.routes if route.matches({**scope, "method": "GET"})[0] is not Match.NONE
    ]
    # A path of its own (/flows/validate) is that resource, not one of the ids a template beside it
    # takes (/flows/{flow_id}): its Allow names its own methods only.
    fixed = [route for route in matched if not getattr(route, "param_convertors", None)]
    found: set[str] = set()
    for route in fixed or matched:
        found.update(getattr(route, "methods", None) or ())
    return sorted(found)


class CallbackAdmission:
    """At most ``concurrency`` workers' callbacks are handled at once in this process (body read,
    parsed, committed, next webhooks handed on); the others wait their turn, first come first
    served, before their body is read. Reads (run pages, run status, health, metrics) do not go
    through this gate: however deep a backlog of callbacks, the event loop has at most
    ``concurrency`` of them in hand, so a read waits for those, not for the backlog.

    A read also goes first: while one is being answered, no further callback starts beyond one
    in hand, so the read shares the event loop and the GIL with as few callbacks as possible. A
    read counts until its response starts, so an open event stream holds nothing back, and one
    callback always runs, so a stream of reads cannot starve the workers.

    Beyond ``queue`` callbacks waiting, a callback is answered 503 with ``Retry-After``: its
    body unread and nothing applied, so posting it again later is safe (a callback applied twice
    is a harmless duplicate anyway)."""

    def __init__(self, app: ASGIApp, concurrency: int, queue: int, retry_after: int) -> None:
        if concurrency < 1:
            raise ValueError(f"STITCH_CALLBACK_CONCURRENCY is {concurrency}; it must be at least 1")
        if queue < 0:
            raise ValueError(f"STITCH_CALLBACK_QUEUE is {queue}; it must be 0 or more")
        self.app = app
        self.concurrency = concurrency
        self.queue = queue
        self.retry_after = retry_after
        self.active = 0
        self.reads = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif scope["method"] in ("GET", "HEAD"):
            await self._read(scope, receive, send)
        elif scope["method"] != "POST" or not scope["path"].startswith(CALLBACK_PREFIX):
            await self.app(scope, receive, send)
        elif self.active < self._limit() and not self._waiting:
            self.active += 1
            try:
                await self.app(scope, receive, send)
            finally:
                self._pass_turn()
        elif len(self._waiting) >= self.queue:
            metrics.callback_refused()
            await self._refuse(scope, send)
        else:
            await self._wait_turn()
            try:
                await self.app(scope, receive, send)
            finally:
                self._pass_turn()

    def _limit(self) -> int:
        return 1 if self.reads else self.concurrency

    async def _read(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.reads += 1
        counted = True

        def done() -> None:
            nonlocal counted
            if counted:
                counted = False
                self.reads -= 1
                self._admit()

        async def send_and_release(message: Message) -> None:
            if message["type"] == "http.response.start":
                done()
            await send(message)

        try:
            await self.app(scope, receive, send_and_release)
        finally:
            done()

    async def _wait_turn(self) -> None:
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        metrics.callbacks_waiting(len(self._waiting))
        try:
            await turn
        except BaseException:
            if turn.done() and not turn.cancelled():
                self._pass_turn()  # the turn was handed over as this request went away: hand it on
            elif turn in self._waiting:  # _admit may have passed over it already
                self._waiting.remove(turn)
            metrics.callbacks_waiting(len(self._waiting))
            raise

    def _pass_turn(self) -> None:
        """A finished callback gives its place back; the longest waiting ones take the free places."""
        self.active -= 1
        self._admit()

    def _admit(self) -> None:
        while self._waiting and self.active < self._limit():
            turn = self._waiting.popleft()
            if not turn.done():
                self.active += 1
                turn.set_result(None)
        metrics.callbacks_waiting(len(self._waiting))

    async def _refuse(self, scope: Scope, send: Send) -> None:
        detail = (
            f"this server has {len(self._waiting)} callbacks waiting (STITCH_CALLBACK_QUEUE={self.queue}); "
            f"nothing was applied: post the same callback again after {self.retry_after} s (Retry-After)"
        )
        response = JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(self.retry_after)})
        await response(scope, _no_body, send)
