"""Every use of the MCP SDK's private parts, and nothing else.

The SDK may rename or drop any of these in a release without notice. Kept here, an upgrade is
checked by reading this one module (``tests/server/test_sdk_compat.py`` fails on a private use
anywhere else). Each function says what it reaches and, under "Waits for", the public API that
would retire it; none exists in ``mcp`` 2.3.0, the version these were written against, and no
upstream issue asks for them unless one is named.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.subscriptions import SubscriptionBus

# The stream pair the SDK's own transports use (``mcp.shared._context_streams``), which the stdio
# loop hands to the low-level server. Waits for: a public export of it.
from mcp.shared._context_streams import create_context_streams

log = logging.getLogger(__name__)

__all__ = [
    "catalog_counts",
    "claimed_stdin",
    "connection_of",
    "create_context_streams",
    "lowlevel_server",
    "remove_request_handler",
    "serve_tool_input_schemas",
    "subscriptions_of",
]


def lowlevel_server(server: MCPServer[Any]) -> Server[Any]:
    """The request-handler registry behind an ``MCPServer`` (``MCPServer._lowlevel_server``).

    Needed to add ``logging/setLevel``, wrap ``prompts/get`` and the lifespan, serve the tool
    input schemas and run our own stdio loop.

    Waits for: a public accessor on ``MCPServer`` (or ``MCPServer`` methods for each of these)."""
    return server._lowlevel_server


def remove_request_handler(server: MCPServer[Any], method: str) -> None:
    """Unregister a request handler (``Server._request_handlers``), from which the SDK derives the
    advertised capabilities.

    Waits for: ``Server.remove_request_handler`` (the SDK has ``add_request_handler`` only)."""
    lowlevel_server(server)._request_handlers.pop(method, None)


def catalog_counts(server: MCPServer[Any]) -> tuple[int, int]:
    """How many prompts and how many resources (templates included) are registered, without an event loop.

    Reads ``MCPServer._prompt_manager`` / ``_resource_manager``, since this runs before the
    server's event loop does.

    Waits for: synchronous counterparts of ``MCPServer.list_prompts`` / ``list_resources``."""
    resources = server._resource_manager
    return len(server._prompt_manager.list_prompts()), len(resources.list_resources()) + len(resources.list_templates())


def subscriptions_of(server: MCPServer[Any]) -> SubscriptionBus:
    """The server's subscription bus (``MCPServer._subscriptions``), which a ``Context`` built for a
    call made in process (without a request) needs for ``ctx.notify_*``, as ``MCPServer.call_tool``
    builds it.

    Waits for: a public ``MCPServer.subscriptions`` (or a public way to make that ``Context``)."""
    return server._subscriptions


def connection_of(session: ServerSession) -> Connection | None:
    """The per-client ``Connection`` a request arrived on (``ServerSession._connection``).

    The SDK's own ``Context`` has a public ``connection``, but request handlers and middleware are
    handed a ``ServerRequestContext`` without it. Client logging needs it to keep one level per
    connection and forget it when the connection closes (``Connection.exit_stack``).

    Waits for: the SDK's context rework (``ServerRunner._make_context``, marked TODO(L54) in
    ``mcp`` 2.3.0), after which handlers get the ``Context`` with its public ``connection``."""
    connection = getattr(session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def claimed_stdin() -> tuple[Any, Callable[[], None] | None]:
    """Lines of the real stdin as an async iterable, with fd 0 pointed at /dev/null while serving
    (so a tool or child process reading stdin cannot steal protocol bytes), and the function that
    gives fd 0 back.

    ``stdio_server()`` claims fd 0 this way only when it reads stdin itself; passing our own
    reader (to answer malformed lines) skips it, so its helpers ``_claim_fd``,
    ``_open_stdin_diversion`` and ``_UnownedTextWrapper`` are used directly. Should they move,
    stdin is read in place, without the diversion.

    Waits for: ``stdio_server()`` taking a line filter, or claiming fd 0 for a given reader."""
    try:
        from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _UnownedTextWrapper
    except ImportError:
        log.debug("mcp.server.stdio internals not found; reading stdin without diverting fd 0")
        return anyio.wrap_file(sys.stdin), None
    buffer, release = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
    return anyio.wrap_file(_UnownedTextWrapper(buffer, encoding="utf-8", errors="replace")), release


def serve_tool_input_schemas(server: MCPServer[Any], lookup: Callable[[str], Mapping[str, Any] | None]) -> None:
    """Where the SDK finds a tool's input schema before any handler runs (``Mcp-Param-*`` header
    checks over streamable HTTP): ``MCPServer`` points it at its private tool manager, which our
    tools are not registered in.

    Waits for: a public way to give ``MCPServer`` this lookup (it is a ``Server`` constructor argument)."""
    lowlevel_server(server).get_tool_input_schema = lookup
