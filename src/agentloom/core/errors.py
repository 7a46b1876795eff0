"""Errors a caller (a person or a model) is meant to read.

Every message names the field or thing at fault, the problem, and the fix.
"""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError


class AgentloomError(ToolError):
    """An error whose message is shown to the MCP client as it is.

    It subclasses the SDK's ToolError so a tool can simply raise it.
    """


class ConfigError(AgentloomError):
    """The configuration is invalid; the message names the key and the fix."""


class NotFoundError(AgentloomError):
    """A named thing (collection, document, model...) does not exist."""


class DependencyUnavailable(AgentloomError):
    """A dependency (model, remote service, library) cannot be used right now."""
