"""The ASGI layers in front of the Stitch routes: the body size limit and the API key.

Both work on the raw ASGI messages, so a refused request is answered before its body is
read or parsed (a stranger's body is never read at all).
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentloom.stitch import console

PREFIX = "/api/stitch"


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

    OPEN_PREFIX = f"{PREFIX}/callback/"
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

    found: set[str] = set()
    for route in scope["app"].router.routes:
        match, _ = route.matches({**scope, "method": "GET"})
        if match is not Match.NONE:
            found.update(getattr(route, "methods", None) or ())
    return sorted(found)
