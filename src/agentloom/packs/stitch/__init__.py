"""The stitch pack: compact MCP tools over a running Stitch server's HTTP API."""

from agentloom.packs.stitch.tools import pack

__all__ = ["pack"]
