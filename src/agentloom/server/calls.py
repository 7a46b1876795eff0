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

Tools are built with the SDK's public ``Tool.from_function`` and kept here, in the order they
were added, rather than in ``MCPServer``'s private tool manager: ``list_tools`` and ``call_tool``
are the SDK's public seams for what is listed and called. A tool listed from the tool cache
(``toolcache``) is built on its first call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Icon, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import ValidationError

from agentloom.core.breakers import DependencyFailure
from agentloom.server import sdk_compat
from agentloom.server.messages import argument_errors, unknown_tool, validation_summary
from agentloom.server.schemas import (
    clean_description,
    compact_annotations,
    compact_output_schema,
    compact_schema,
)
from agentloom.server.toolcache import ToolCache, cacheable, registration_key
from agentloom.server.work import serving

log = logging.getLogger(__name__)


class LoomServer(MCPServer):
    def __init__(
        self, *args: Any, tools: list[Tool] | None = None, tool_cache: ToolCache | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._tool_cache = tool_cache
        self._tools: dict[str, Tool] = {tool.name: tool for tool in tools or ()}
        # Tools listed from the cache and built on their first call: name -> (fn, options, definition).
        self._deferred: dict[str, tuple[Callable[..., Any], dict[str, Any], MCPTool]] = {}
        self._order: list[str] = list(self._tools)
        sdk_compat.serve_tool_input_schemas(self, self._input_schema)

    def add_strict_tool(self, fn: Callable[..., Any], **options: Any) -> None:
        """Register a tool whose input schema refuses arguments it does not declare.

        The schema says ``additionalProperties: false`` and :meth:`call_tool` enforces it by
        name; a stricter pydantic model per tool would cost start-up time for the same check.
        With a tool cache, a definition saved by an earlier start is listed as it is and the
        tool is built (its argument model made) on its first call (``toolcache``).

        What is listed is said once (``schemas``): the description without the docstring's
        indentation, schemas without pydantic's titles and other redundancy, annotations
        without the specification's defaults."""
        name = options.get("name") or fn.__name__
        if name in self._order:  # as the SDK's tool manager: the first registration of a name stays
            log.warning("Tool already exists: %s", name)
            return
        cache = self._tool_cache if cacheable(fn) else None
        key = registration_key(fn, options) if cache is not None else ""
        options = {
            **options,
            "description": clean_description(options.get("description") or fn.__doc__),
            "annotations": compact_annotations(options.get("annotations")),
        }
        saved = cache.get(key) if cache is not None else None
        if saved is not None:
            self._deferred[name] = (fn, options, saved)
        else:
            tool = self._tools[name] = _strict_tool(fn, options)
            if cache is not None:
                cache.put(key, definition(tool))
        self._order.append(name)

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        """The SDK's registration (and its ``@server.tool()``): here it adds a strict tool, listed and
        called like every other, since the SDK's own tool manager is not where tools are kept."""
        given = {"name": name, "title": title, "annotations": annotations, "icons": icons, "meta": meta}
        options = {key: value for key, value in given.items() if value is not None}
        self.add_strict_tool(fn, description=description, structured_output=structured_output, **options)

    def get_tool(self, name: str) -> Tool | None:
        """The tool called ``name``, built now if it was listed from the cache."""
        deferred = self._deferred.pop(name, None)
        if deferred is not None:
            fn, options, _ = deferred
            self._tools[name] = _strict_tool(fn, options)
        return self._tools.get(name)

    def save_tool_cache(self) -> None:
        if self._tool_cache is not None:
            self._tool_cache.save()

    def tool_names(self) -> list[str]:
        return list(self._order)

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        deferred = self._deferred.get(name)
        if deferred is not None:
            return deferred[2].input_schema
        tool = self._tools.get(name)
        return None if tool is None else tool.parameters

    async def list_tools(self) -> list[MCPTool]:
        return [self._deferred[n][2] if n in self._deferred else definition(self._tools[n]) for n in self._order]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        tool = self.get_tool(name)
        if tool is None:
            raise ToolError(unknown_tool(name, self.tool_names()))
        if context is None:
            context = Context(mcp_server=self, subscriptions=sdk_compat.subscriptions_of(self))
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
            with serving(context):
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
            return tool.fn_metadata.convert_result(result)  # type: ignore[return-value]  # InputRequiredResult: no tool here returns one
        except Exception as exc:
            raise UnexpectedToolError(f"{name} returned a result that does not match its output schema.") from exc


def _strict_tool(fn: Callable[..., Any], options: dict[str, Any]) -> Tool:
    tool = Tool.from_function(fn, **options)
    tool.parameters = compact_schema({**tool.parameters, "additionalProperties": False}) or {}
    if tool.fn_metadata.output_schema is not None:
        # Read live by the SDK (output validation uses the model, not this schema); the Tool's
        # cached copy is dropped so that tools/list shows the compact one.
        tool.fn_metadata.output_schema = compact_output_schema(tool.fn_metadata.output_schema)
        tool.__dict__.pop("output_schema", None)
    return tool


def definition(tool: Tool) -> MCPTool:
    """What ``tools/list`` shows of a registered tool (as ``MCPServer.list_tools`` builds it)."""
    return MCPTool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.parameters,
        output_schema=tool.output_schema,
        annotations=tool.annotations,
        icons=tool.icons,
        _meta=tool.meta,
    )
