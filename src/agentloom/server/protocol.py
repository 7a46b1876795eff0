"""Exact JSON-RPC / MCP protocol answers the SDK does not give on its own.

:func:`configure_protocol` is called once by the Host, after every pack's tools are
registered. It installs, on the SDK's own seams:

- :mod:`~agentloom.server.protocol_catalog`: prompts and resources are advertised only
  when the server has some; an unknown prompt is ``-32602`` naming it.
- :mod:`~agentloom.server.protocol_errors`: bad params and requests sent before
  ``initialize`` are explained (field, problem, fix) instead of "Invalid request parameters".
- :mod:`~agentloom.server.client_logging`: ``logging/setLevel`` (the ``logging``
  capability) and ``notifications/message`` carrying the ``agentloom`` loggers' records.

The transports add the envelope checks (:mod:`~agentloom.server.protocol_envelope`):
:mod:`~agentloom.server.stdio` per line, :mod:`~agentloom.server.http` per HTTP request.

The handlers are added to the SDK's request-handler registry
(:func:`~agentloom.server.sdk_compat.lowlevel_server`), whose ``lifespan`` the relay joins
so it runs exactly as long as the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import SetLevelRequestParams

from agentloom.server.client_logging import ClientLogRelay
from agentloom.server.protocol_catalog import configure_catalog
from agentloom.server.protocol_errors import ExplainedErrors
from agentloom.server.sdk_compat import lowlevel_server


def configure_protocol(server: MCPServer) -> ClientLogRelay:
    """Install the protocol-level handlers on a freshly built server (called once by Host)."""
    lowlevel = lowlevel_server(server)
    configure_catalog(server)
    relay = ClientLogRelay()
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, relay.set_level)
    # Innermost, after the SDK's own middleware: they see the rewritten errors, and the
    # log scope covers exactly the handler (and the validation around it).
    server.middleware.append(relay.scope_requests)
    server.middleware.append(ExplainedErrors())
    lowlevel.lifespan = _with_relay(lowlevel.lifespan, relay)
    return relay


def _with_relay(
    lifespan: Callable[[Any], AbstractAsyncContextManager[Any]], relay: ClientLogRelay
) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
    @asynccontextmanager
    async def run(app: Any) -> AsyncIterator[Any]:
        async with lifespan(app) as state, relay.running():
            yield state

    return run
