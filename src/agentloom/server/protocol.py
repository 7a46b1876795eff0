"""Exact JSON-RPC / MCP protocol answers the SDK does not give on its own (filled in by the protocol work)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


def configure_protocol(server: MCPServer) -> None:
    """Install the protocol-level handlers on a freshly built server (called once by Host)."""
