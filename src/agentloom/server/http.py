"""The streamable HTTP app of the MCP server."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer


def http_app(server: MCPServer, host: str) -> Any:
    """The ASGI app serving ``server`` at ``/mcp``."""
    return server.streamable_http_app(streamable_http_path="/mcp", host=host)
