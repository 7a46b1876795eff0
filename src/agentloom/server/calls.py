"""The one path every tool call takes, and the strict argument schemas it checks against.

:class:`LoomServer` is ``MCPServer`` with its ``call_tool`` replaced, so every pack's
failures reach the client the same way (``isError: true`` and one message):

- unknown tool: the nearest tool names;
- arguments: unknown ones are refused (every input schema says
  ``additionalProperties: false``), missing or mistyped ones are named with the expected
  type, never pydantic's dump;
- :class:`~agentloom.core.errors.AgentloomError` (and the SDK's ``ToolError``): its text;
- a dependency that failed outside a guarded call: the failure's own text;
- anything else is a bug: the client gets the tool name and the exception type, the log
  gets the traceback.

It relies on the SDK's ``Tool`` fields (``fn_metadata``, ``context_kwarg``,
``parameters``) and ``ToolManager.get_tool``/``list_tools``.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult
from pydantic import ValidationError

from agentloom.core.breakers import DependencyFailure
from agentloom.server.messages import argument_errors, unknown_tool, validation_summary

log = logging.getLogger(__name__)


class LoomServer(MCPServer):
    def add_strict_tool(self, fn: Any, **options: Any) -> Tool:
        """Register a tool whose input schema refuses arguments it does not declare.

        The schema says ``additionalProperties: false`` and :meth:`call_tool` enforces it by
        name; a stricter pydantic model per tool would cost start-up time for the same check."""
        self.add_tool(fn, **options)
        tool = self._tool_manager.get_tool(options.get("name") or fn.__name__)
        assert tool is not None
        tool.parameters = {**tool.parameters, "additionalProperties": False}
        return tool

    def tool_names(self) -> list[str]:
        return [t.name for t in self._tool_manager.list_tools()]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            raise ToolError(unknown_tool(name, self.tool_names()))
        if context is None:
            context = Context(mcp_server=self, subscriptions=self._subscriptions)
        accepted = tool.parameters.get("properties", {})
        unknown = [key for key in arguments if key not in accepted]
        try:
            validated = tool.fn_metadata.validate_arguments({k: v for k, v in arguments.items() if k in accepted})
        except ValidationError as exc:
            raise ToolError(argument_errors(name, tool.parameters, exc, unknown)) from None
        if unknown:
            raise ToolError(argument_errors(name, tool.parameters, None, unknown))
        direct = {tool.context_kwarg: context} if tool.context_kwarg else {}
        try:
            result = await tool.fn_metadata.call_fn(tool.fn, tool.is_async, validated, direct)
        except (MCPError, ToolError):
            raise  # AgentloomError is a ToolError: its message is meant for the client as it is
        except DependencyFailure as exc:
            raise ToolError(str(exc)) from exc
        except ValidationError as exc:  # a pack validating data it was given
            raise ToolError(f"{name}: {validation_summary(exc)}") from exc
        except Exception as exc:
            raise UnexpectedToolError(
                f"{name} failed with an internal error ({type(exc).__name__}); the server log has the details."
            ) from exc
        try:
            return tool.fn_metadata.convert_result(result)  # type: ignore[return-value]
        except Exception as exc:
            raise UnexpectedToolError(f"{name} returned a result that does not match its output schema.") from exc
