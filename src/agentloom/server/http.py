"""The streamable HTTP app of the MCP server, behind a guard that makes its refusals exact.

The SDK's app at ``/mcp`` is kept whole; :class:`ProtocolGuard` sits in front of it
because, left alone, it:

- hands out an ``Mcp-Session-Id`` header on refusals (``406`` wrong ``Accept``, ``400``
  bad body, ``405`` wrong method, ``400`` missing session): a request without a session
  opens one first, and the refusal names it although the session is discarded at once;
- reads a request whose ``id`` is ``null``, an object or an array as a notification
  (``202``, never answered), and answers other malformed bodies with ``id: null`` even
  when the id was readable;
- answers an unsupported ``MCP-Protocol-Version`` header with an error about the
  request body (it routes unknown versions to its 2026-07-28 entry);
- answers a request sent without a session (``tools/list`` before ``initialize``) with
  a bare "Missing session ID";
- compares header values with their optional whitespace (RFC 9110 section 5.5 excludes it).

The guard answers those itself, with the field, the problem and the fix, and passes
everything else through unchanged (the body it read is replayed). Checks run in the
SDK's order: Host/Origin first (with the SDK's own settings), then ``Accept`` and
``Content-Type`` (left to the SDK), then the body.

SDK behaviour relied on: ``StreamableHTTPSessionManager`` routes a request by its
``MCP-Protocol-Version`` header (absent or a handshake version: the session-based
transport; anything else: the 2026-07-28 single-exchange entry), and exposes its
``security_settings`` and ``max_request_body_size``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import (
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp_types import PROTOCOL_VERSION_META_KEY, JSONRPCError
from mcp_types.jsonrpc import INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentloom.server.protocol_envelope import (
    check_envelope,
    decode,
    error_reply,
    readable_id,
)

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
SUPPORTED_VERSIONS = (*reversed(MODERN_PROTOCOL_VERSIONS), *reversed(HANDSHAKE_PROTOCOL_VERSIONS))
"""Newest first, as error messages list them."""


# The SDK's default (4 MiB) refuses a text that stdio takes; this admits the largest a pack accepts by
# default (vector_add_document: 20 MB) even with every character JSON-escaped (at worst 6 bytes).
MAX_BODY = 128 * 1024 * 1024


def http_app(server: MCPServer, host: str) -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp``."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, max_request_body_size=MAX_BODY)
    manager = server.session_manager
    return ProtocolGuard(app, manager.security_settings, manager.max_request_body_size)


class ProtocolGuard:
    """ASGI wrapper around the SDK's streamable HTTP app (see the module docstring)."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings | None, max_body: int) -> None:
        self.app = app
        self._security = TransportSecurityMiddleware(security)
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != MCP_PATH:
            await self.app(scope, receive, send)
            return
        # RFC 9110 5.5: a field value excludes leading and trailing whitespace.
        scope = {**scope, "headers": [(k, v.strip(b" \t")) for k, v in scope["headers"]]}
        send = _no_session_on_refusal(send)
        request = Request(scope, receive)
        refusal = await self._security.validate_request(request, is_post=request.method == "POST")
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if request.method != "POST":
            reply = self._check_stream_request(request)
            if reply is not None:
                await _answer(reply, scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        has_json, _ = check_accept_headers(request)
        json_body = "application/json" in request.headers.get("content-type", "").lower()
        if not (has_json and json_body):  # the SDK answers 406 / 415 (and needs SSE only on some routes)
            await self.app(scope, receive, send)
            return
        body, complete = await _read_body(receive, self._max_body)
        replay = _replay(body, receive, more=not complete)
        if complete:
            reply = self._check_post(request, body)
            if reply is not None:
                await _answer(reply, scope, replay, send)
                return
        await self.app(scope, replay, send)  # an oversized body: the SDK answers 413

    def _check_stream_request(self, request: Request) -> JSONRPCError | None:
        """GET (the standalone SSE stream) and DELETE (end the session): header and session checks."""
        version = request.headers.get(VERSION_HEADER)
        if version is not None and version not in SUPPORTED_VERSIONS:
            return unsupported_version(version, None, modern=False)
        if version in MODERN_PROTOCOL_VERSIONS or request.method not in ("GET", "DELETE"):
            return None  # the 2026-07-28 entry has no sessions; other methods get the SDK's 405
        if request.method == "GET" and not check_accept_headers(request)[1]:
            return None  # the SDK's 406 comes first
        if SESSION_HEADER.decode() not in request.headers:
            what = "GET /mcp opens the stream of a session" if request.method == "GET" else "DELETE /mcp ends a session"
            return error_reply(
                INVALID_REQUEST,
                f"Bad Request: {what}, and this request has no Mcp-Session-Id header. Send the Mcp-Session-Id "
                "header from the initialize response.",
            )
        return None

    def _check_post(self, request: Request, body: bytes) -> JSONRPCError | None:
        message, reply = decode(body)
        if reply is not None:
            return reply
        request_id = readable_id(message)
        envelope_version = _envelope_version(message)
        version = request.headers.get(VERSION_HEADER)
        if version is not None and version not in SUPPORTED_VERSIONS:
            if envelope_version is not None and envelope_version != version:
                return None  # the SDK answers HeaderMismatch, naming the header
            return unsupported_version(version, request_id, modern=envelope_version is not None)
        reply = check_envelope(message)
        if reply is not None:
            return reply
        session_route = version is None or version in HANDSHAKE_PROTOCOL_VERSIONS
        initialize = isinstance(message, dict) and message.get("method") == "initialize" and "id" in message
        if session_route and not initialize and SESSION_HEADER.decode() not in request.headers:
            return needs_session(message, request_id, envelope_version)
        return None


def unsupported_version(version: str, request_id: Any, *, modern: bool) -> JSONRPCError:
    """``400``: the ``MCP-Protocol-Version`` header names a version this server does not speak.

    The data is the 2026-07-28 ``UnsupportedProtocolVersionError`` shape; for a request
    carrying that revision's envelope, ``supported`` lists what ``server/discover`` lists.
    """
    handshake = ", ".join(reversed(HANDSHAKE_PROTOCOL_VERSIONS))
    modern_versions = ", ".join(reversed(MODERN_PROTOCOL_VERSIONS))
    return error_reply(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported MCP-Protocol-Version header {version!r}. This server supports {modern_versions} "
        f"(each request carries its version in params._meta, no session) and {handshake} "
        "(negotiated by initialize). Send the version initialize negotiated, or one of these; "
        "the initialize request itself needs no header.",
        request_id,
        data={"supported": list(MODERN_PROTOCOL_VERSIONS if modern else SUPPORTED_VERSIONS), "requested": version},
    )


def needs_session(message: Any, request_id: Any, envelope_version: str | None) -> JSONRPCError:
    """``400``: a session-based message (anything but ``initialize``) sent without a session."""
    method = message.get("method") if isinstance(message, dict) else None
    what = f"{method}" if isinstance(method, str) else "This message"
    if envelope_version is not None:
        text = (
            f"Bad Request: {what} carries the {envelope_version} params._meta envelope but no MCP-Protocol-Version "
            f"header. Send the header MCP-Protocol-Version: {envelope_version} with it (such requests need no session)."
        )
    else:
        text = (
            f"Bad Request: {what} needs a session, and this request has no Mcp-Session-Id header. "
            "Send initialize first (without the header), then send the Mcp-Session-Id header from its "
            "response with every later request."
        )
    return error_reply(INVALID_REQUEST, text, request_id)


def _envelope_version(message: Any) -> str | None:
    """The 2026-07-28 per-request protocol version in ``params._meta``, if the message carries one."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


async def _answer(reply: JSONRPCError, scope: Scope, receive: Receive, send: Send) -> None:
    log.info("refused an HTTP request: %s", reply.error.message)
    # "id" always present: JSON-RPC answers an unreadable request id with "id": null.
    body = {"jsonrpc": "2.0", "id": reply.id, "error": reply.error.model_dump(mode="json", exclude_none=True)}
    await Response(json.dumps(body), status_code=400, media_type="application/json")(scope, receive, send)


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The request body, and whether it is all there (False: over ``limit``, or the client left)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > limit:
            return b"".join(chunks), False


def _replay(body: bytes, receive: Receive, *, more: bool) -> Receive:
    """A ``receive`` that hands out the body read so far, then the rest of the original one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay


def _no_session_on_refusal(send: Send) -> Callable[[Message], Awaitable[None]]:
    """Drop ``Mcp-Session-Id`` from every 4xx/5xx: a refused request must not be handed a session."""

    async def guarded(message: Message) -> None:
        if message["type"] == "http.response.start" and message.get("status", 200) >= 400:
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != SESSION_HEADER]
            message = {**message, "headers": headers}
        await send(message)

    return guarded
