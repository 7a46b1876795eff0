"""What ids look like: flows and runs are UUIDs; node ids are a URL-safe alphabet.

Node ids (and the instance keys made from them, ``nodeId_0_1``) travel as one path segment
of the callback, complete and retry URLs, so they are limited to characters that need no
escaping and that no HTTP client rewrites: ASCII letters, digits, ``_``, ``-``, ``.`` and
``:`` (React Flow's own ids, such as ``dndnode_0`` or ``node-1``, fit). An id made of dots
alone (``.``, ``..``) is refused too: clients resolve those as "this" and "parent" segments.

This module imports nothing heavy: the stitch MCP pack uses it to check its arguments.
"""

from __future__ import annotations

import re

NODE_ID_CHARACTERS = "letters, digits, '_', '-', '.' and ':'"
NODE_ID_MAX = 200
_NODE_ID = re.compile(r"[A-Za-z0-9_.:-]+")
_DOTS = re.compile(r"\.+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def node_id_problem(node_id: str, *, max_length: int = NODE_ID_MAX) -> str | None:
    """Why ``node_id`` cannot be a node id (or instance key), or None when it can."""
    if not node_id or len(node_id) > max_length:
        return f"node id {shown(node_id)} must be 1 to {max_length} characters long"
    if not _NODE_ID.fullmatch(node_id):
        return f"node id {shown(node_id)} may contain only {NODE_ID_CHARACTERS} (it is a segment of the callback URL)"
    if _DOTS.fullmatch(node_id):
        return f"node id {shown(node_id)} is made of dots alone, which URLs treat as '.' or '..'; add a letter"
    return None


def is_uuid(value: str) -> bool:
    return _UUID.fullmatch(value) is not None


def shown(value: object, limit: int = 80) -> str:
    """A quoted, ASCII-only, bounded form of a value for messages (safe to put in any response)."""
    text = ascii(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


class NotFound(LookupError):
    """No flow, run or node by that id (the API answers 404 with the message)."""


def missing(kind: str, value: str) -> NotFound:
    # Only UUIDs ever reach the database: anything else (NUL characters, surrogates, ...) is
    # unknown on both databases alike instead of an error on one of them.
    return NotFound(f"no {kind} {value}" if is_uuid(value) else f"no {kind} {shown(value)} ({kind} ids are UUIDs)")
