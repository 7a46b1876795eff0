"""Prompts and resources: advertised only when the server has some; unknown names are ``-32602``.

Why: ``MCPServer`` registers the prompts and resources handlers whatever it holds, and
the SDK derives the ``initialize`` (and ``server/discover``) capabilities from the
registered handlers, so a server with no prompt and no resource still advertises both.
And ``prompts/get`` with an unknown name raised a bare ``ValueError``: the client got
error code 0 and the log a traceback at ERROR.

The rule applied here, per capability negotiation and JSON-RPC (``-32601`` is "the
method does not exist / is not available"): the *listing* methods (``prompts/list``,
``resources/list``, ``resources/templates/list``) exist only while the capability is
declared, so without prompts or resources they answer ``-32601 Method not found`` and
the capability is not advertised. Fetching by name (``prompts/get``,
``resources/read``) stays answerable so that a name the server does not have is what
the spec says it is, ``-32602 Invalid params`` naming it (the SDK's ``resources/read``
already does that).

Decided once, when :func:`configure_catalog` runs: the Host calls it after every pack
is loaded, and packs register tools only.

The SDK has no public way to unregister a handler or to count prompts and resources
without an event loop: :mod:`~agentloom.server.sdk_compat` does both.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import GetPromptRequestParams
from mcp_types.jsonrpc import INVALID_PARAMS

from agentloom.server.sdk_compat import catalog_counts, lowlevel_server, remove_request_handler

LISTING_METHODS = {
    "prompts": ("prompts/list",),
    "resources": ("resources/list", "resources/templates/list"),
}


def configure_catalog(server: MCPServer) -> None:
    lowlevel = lowlevel_server(server)
    prompts, resources = catalog_counts(server)
    has = {"prompts": prompts > 0, "resources": resources > 0}
    for capability, methods in LISTING_METHODS.items():
        if not has[capability]:
            for method in methods:
                remove_request_handler(server, method)

    original = lowlevel.get_request_handler("prompts/get")

    async def get_prompt(ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> Any:
        known = [p.name for p in await server.list_prompts()]
        if params.name not in known:
            if known:
                detail = f"Available prompts: {', '.join(sorted(known))}."
            else:
                detail = (
                    "This server has no prompts (it does not declare the prompts capability); "
                    "call tools/list for its tools."
                )
            raise MCPError(INVALID_PARAMS, f"Unknown prompt {params.name!r}. {detail}", data={"name": params.name})
        assert original is not None
        return await original.handler(ctx, params)

    lowlevel.add_request_handler("prompts/get", GetPromptRequestParams, get_prompt)
