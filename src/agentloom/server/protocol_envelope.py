"""The JSON-RPC 2.0 envelope checks both transports run on every incoming message.

Why: the SDK reads a message with pydantic models whose unknown keys are ignored, so
``{"jsonrpc": "2.0", "id": null, "method": "tools/list"}`` (or an object or array as
``id``) is read as a *notification*: the client waits forever for an answer that never
comes. And when a message fails validation, the SDK's error carries ``"id": null`` even
when the id was perfectly readable, so the client cannot match the error to its request.

:func:`check_envelope` looks at the decoded JSON first and returns the JSON-RPC error
to send instead (``-32600 Invalid Request``, with the request's id whenever it is a
string or an integer), or ``None`` to let the message through unchanged. The stdio
transport and the HTTP app both call it, so a malformed message gets the same answer
on both.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import ErrorData, JSONRPCError, RequestId
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR


def json_type(value: Any) -> str:
    """How a JSON value reads in an error message: ``null``, ``an array``, ``the string 'x'``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    return type(value).__name__


def readable_id(message: Any) -> RequestId | None:
    """The message's id when an answer can carry it (a string or a non-boolean integer)."""
    if not isinstance(message, dict):
        return None
    value = message.get("id")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def error_reply(code: int, message: str, request_id: RequestId | None = None, data: Any = None) -> JSONRPCError:
    # `data` only when there is some: transports serialize with exclude_unset, and a set None would show as null.
    error = ErrorData(code=code, message=message) if data is None else ErrorData(code=code, message=message, data=data)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def parse_error(detail: str | None = None) -> JSONRPCError:
    text = "Parse error: the message is not valid JSON"
    return error_reply(PARSE_ERROR, f"{text} ({detail})" if detail else text)


def decode(text: str | bytes) -> tuple[Any, JSONRPCError | None]:
    """The decoded JSON, or the ``-32700`` answer when it is not JSON."""
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:  # bare ValueError: huge integer literals; RecursionError: deep nesting
        detail = f"line {exc.lineno} column {exc.colno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else None
        return None, parse_error(detail)


# The SDK's parser gives up somewhere past 128 levels and then answers without the id; a
# message nested deeper than this is refused here, with its id and the limit.
MAX_DEPTH = 100


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest deeper than ``limit`` (iterative: deep input cannot overflow it)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False


def check_envelope(message: Any) -> JSONRPCError | None:
    """The error answering ``message``, or ``None`` when its envelope is a valid JSON-RPC message.

    Only the envelope is checked (``jsonrpc``, ``id``, ``method``, the type of ``params``);
    what the params mean is the SDK's and the handlers' business. Responses (objects with
    ``result`` or ``error``) are passed on: they answer the server's own requests.
    """
    if isinstance(message, list):
        return error_reply(
            INVALID_REQUEST,
            "Invalid Request: the message is a JSON array (a JSON-RPC batch); MCP does not accept batches. "
            "Send each request as its own JSON object.",
        )
    if not isinstance(message, dict):
        return error_reply(
            INVALID_REQUEST, f"Invalid Request: a JSON-RPC message is a JSON object, got {json_type(message)}."
        )
    request_id = readable_id(message)
    if "method" not in message:
        if "result" in message or "error" in message:
            return None  # a response to one of the server's requests
        return error_reply(
            INVALID_REQUEST,
            "Invalid Request: the object has no `method` (nor `result`/`error`), so it is not a request, "
            'a notification or a response. Send {"jsonrpc": "2.0", "id": 1, "method": "...", "params": {...}}.',
            request_id,
        )
    problems: list[str] = []
    if "id" in message and request_id is None:
        problems.append(
            f"`id` must be a string or an integer, got {json_type(message['id'])}; "
            "give each request a unique string or integer id (leave `id` out only for a notification, "
            "which is never answered)"
        )
    if message.get("jsonrpc") != "2.0":
        got = json_type(message["jsonrpc"]) if "jsonrpc" in message else "nothing"
        problems.append(f'`jsonrpc` must be the string "2.0", got {got}')
    if not isinstance(message["method"], str):
        problems.append(f'`method` must be a string such as "tools/list", got {json_type(message["method"])}')
    if problems:
        return error_reply(INVALID_REQUEST, "Invalid Request: " + "; ".join(problems) + ".", request_id)
    params = message.get("params")
    if isinstance(params, dict) and too_deep(params):
        return error_reply(
            INVALID_REQUEST,
            f"Invalid Request: `params` nest objects or arrays deeper than {MAX_DEPTH} levels, more than this "
            "server reads. Flatten the value (or send it as a JSON string).",
            request_id,
        )
    if params is not None and not isinstance(params, dict):
        return error_reply(
            INVALID_PARAMS,
            f"Invalid params for {message['method']}: `params` must be an object of named parameters, "
            f"got {json_type(params)}. MCP passes parameters by name: send an object such as "
            '{"name": "health"}, or leave `params` out.',
            request_id,
        )
    return None
