"""Protocol errors that say what is wrong: bad params, and requests sent before ``initialize``.

Why: the SDK answers both with ``-32602 "Invalid request parameters"`` and empty data,
whether ``tools/call`` lacks its ``name``, its ``arguments`` are an array, or the client
simply has not initialized the connection yet. A client (or the model behind it) cannot
fix what it is not told. :class:`ExplainedErrors` is a ``ServerMiddleware`` (the SDK's
documented seam that wraps validation, the initialization gate and the handler) that
rewrites those two answers with the field, the problem and the fix; codes stay as the
SDK chose them so clients keyed on them behave the same.

SDK behaviour relied on (``mcp.server.runner.ServerRunner._on_request``): params are
validated inside the middleware chain and a failure propagates as pydantic's
``ValidationError``; the initialization gate raises ``MCPError(INVALID_PARAMS,
"Invalid request parameters", data="")``, the only ``MCPError`` of that exact shape
(validation failures are not ``MCPError`` until the dispatcher maps them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import ErrorData
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import ValidationError

from agentloom.server.protocol_envelope import json_type

_GATE_MESSAGE = "Invalid request parameters"  # what the SDK's initialization gate says, verbatim

_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
    "none_required": "null",
    "url_type": "a URL string",
    "url_parsing": "a URL string",
}

# What a field is for, so the message can say what to send instead.
_HINTS: dict[tuple[str, str], str] = {
    ("tools/call", "params.name"): 'the name of a tool listed by tools/list, e.g. "health"',
    ("tools/call", "params.arguments"): (
        "an object mapping the tool's argument names to their values (its inputSchema in tools/list), "
        'e.g. {"check_model": false}'
    ),
    ("prompts/get", "params.name"): "the name of a prompt listed by prompts/list",
    ("prompts/get", "params.arguments"): "an object mapping argument names to string values",
    ("resources/read", "params.uri"): "the URI of a resource listed by resources/list",
    ("logging/setLevel", "params.level"): "one of debug, info, notice, warning, error, critical, alert, emergency",
    ("initialize", "params.protocolVersion"): 'a protocol version string such as "2025-11-25"',
    ("initialize", "params.capabilities"): "an object of the client's capabilities ({} when it has none)",
    ("initialize", "params.clientInfo"): 'an object naming the client, e.g. {"name": "my-client", "version": "1.0"}',
}


def _field(loc: Sequence[int | str]) -> str:
    """``params.a.b`` from a pydantic location, without union member tags such as ``str`` or ``int``."""
    parts = [str(p) for p in loc]
    if parts and parts[0] == "params":
        parts = parts[1:]
    while parts and (parts[-1] in {"str", "int", "float", "bool", "list", "dict", "none"} or "[" in parts[-1]):
        parts.pop()  # pydantic names the union member that failed; the field is what the client knows
    return ".".join(["params", *parts])


def _problems(method: str, error: ValidationError) -> list[tuple[str, str]]:
    """One ``(field, problem)`` per field, union alternatives merged."""
    by_field: dict[str, list[dict[str, Any]]] = {}
    for item in error.errors(include_url=False):
        by_field.setdefault(_field(item["loc"]), []).append(dict(item))
    problems: list[tuple[str, str]] = []
    for field, items in by_field.items():
        hint = _HINTS.get((method, field))
        if any(i["type"] == "missing" for i in items):
            problems.append((field, f"`{field}` is missing" + (f"; send {hint}" if hint else "")))
            continue
        got = json_type(items[0].get("input"))
        expected = [_EXPECTED[i["type"]] for i in items if i["type"] in _EXPECTED]
        if hint:
            problems.append((field, f"`{field}` must be {hint}; got {got}"))
        elif expected:
            problems.append((field, f"`{field}` must be {' or '.join(dict.fromkeys(expected))}; got {got}"))
        elif items[0]["type"] == "literal_error":
            options = (items[0].get("ctx") or {}).get("expected", "one of the allowed values")
            problems.append((field, f"`{field}` must be one of {options}; got {got}"))
        else:
            message = str(items[0]["msg"]).removeprefix("Value error, ")
            problems.append((field, f"`{field}`: {message[:1].lower()}{message[1:]} (got {got})"))
    return problems


def invalid_params(method: str, error: ValidationError) -> MCPError:
    """``-32602`` naming each bad field of ``method``'s params and what to send instead."""
    problems = _problems(method, error)
    text = "; ".join(p for _, p in problems) or "the params do not match the method's schema"
    return MCPError.from_error_data(
        ErrorData(
            code=INVALID_PARAMS,
            message=f"Invalid params for {method}: {text}.",
            data={"method": method, "errors": [{"field": f, "problem": p} for f, p in problems]},
        )
    )


def not_initialized(method: str) -> MCPError:
    return MCPError.from_error_data(
        ErrorData(
            code=INVALID_PARAMS,
            message=(
                f"{method} was sent before initialize: this connection is not initialized yet. "
                "Send initialize first (then the notifications/initialized notification); "
                "until then only ping is answered."
            ),
            data={"method": method, "reason": "not initialized"},
        )
    )


def _is_initialization_gate(exc: MCPError) -> bool:
    error = exc.error
    return error.code == INVALID_PARAMS and error.message == _GATE_MESSAGE and error.data == ""


class ExplainedErrors:
    """``ServerMiddleware`` turning the SDK's bare ``Invalid request parameters`` into explained errors."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:  # a notification: nobody is told anything
            return await call_next(ctx)
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            raise invalid_params(ctx.method, exc) from None
        except MCPError as exc:
            if ctx.method != "initialize" and _is_initialization_gate(exc):
                raise not_initialized(ctx.method) from None
            raise
