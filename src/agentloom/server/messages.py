"""Messages for a tool call the server refuses: unknown tool, unknown or bad arguments.

They are read by a model that will call again, so each names the argument, the problem
and the fix in a line, and never carries pydantic's dump (error codes, links).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def nearest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    choices = list(choices)
    close = difflib.get_close_matches(name, choices, n=n, cutoff=0.5)
    # A shared prefix or containment also counts: vector_find -> vector_search is not "close" by ratio.
    stem = name.split("_")[0]
    related = [c for c in choices if c not in close and (name in c or c in name or c.split("_")[0] == stem)]
    return (close + sorted(related))[:n]


def unknown_tool(name: str, known: Sequence[str]) -> str:
    suggestions = nearest(name, known)
    hint = f"Did you mean {_names(suggestions)}? " if suggestions else ""
    return f"Unknown tool {name!r}. {hint}Call tools/list for every tool; this server has {len(known)}."


def describe_type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join("null" if v is None else repr(v) for v in schema["enum"])  # null: JSON, not None
    if "const" in schema:
        return repr(schema["const"])
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return " or ".join(dict.fromkeys(describe_type(o) for o in options))
    kind = schema.get("type")
    if isinstance(kind, list):  # each type with the keywords that apply to it (items of an array)
        return " or ".join(describe_type({**schema, "type": k}) if k in _TYPE_WORDS else k for k in kind)
    if kind == "array" and isinstance(schema.get("items"), dict) and schema["items"].get("type"):
        return f"an array of {describe_type(schema['items']).removeprefix('a ').removeprefix('an ')}s"
    return _TYPE_WORDS.get(str(kind), "a JSON value")


def argument_errors(
    tool: str, schema: dict[str, Any], error: ValidationError | None, unknown: Sequence[str] = ()
) -> str:
    """One line per problem: unknown arguments, missing ones, then wrong values."""
    properties: dict[str, Any] = schema.get("properties", {})
    accepted = list(properties)
    unknown = list(unknown)
    missing: list[str] = []
    wrong: list[str] = []
    items = error.errors(include_url=False) if error is not None else []
    for item in _union_misses(items, schema):
        loc = [str(part) for part in item["loc"]]
        name = loc[0] if loc else "arguments"
        if item["type"] == "extra_forbidden" and len(loc) == 1:
            unknown.append(name)
        elif item["type"] == "missing" and len(loc) == 1:
            missing.append(name)
        elif item["type"] == _UNION_MISS:
            wrong.append(f"`{'.'.join(loc)}`: {item['msg']}")
        else:
            where = ".".join(loc) or "arguments"
            expected = describe_type(properties.get(name, {})) if len(loc) == 1 else None
            wrong.append(f"`{where}`: {_problem(item, expected)}")
    lines: list[str] = []
    if unknown:
        hints = [
            f"`{u}` -> `{m[0]}`?" for u in unknown if (m := difflib.get_close_matches(u, accepted, n=1, cutoff=0.6))
        ]
        lines.append(
            f"{tool} does not take {_names(unknown)}. Accepted arguments: {', '.join(accepted) or 'none'}."
            + (f" Did you mean {' '.join(hints)}" if hints else "")
        )
    if missing:
        word = "argument" if len(missing) == 1 else "arguments"
        lines.append(
            f"{tool} is missing the required {word} "
            + ", ".join(f"`{m}` ({describe_type(properties.get(m, {}))})" for m in missing)
            + "."
        )
    if wrong:
        lines.append(f"{tool}: " + "; ".join(wrong) + ".")
    return "\n".join(lines) or f"{tool}: invalid arguments."


_UNION_MISS = "agentloom_union_miss"
_PLURALS = {
    "string": "strings",
    "integer": "integers",
    "number": "numbers",
    "boolean": "booleans",
    "array": "arrays",
    "object": "objects",
    "null": "null",
}
_NOT_ALLOWED = {
    dict: "nested objects are not allowed",
    list: "nested arrays are not allowed",
    type(None): "null is not allowed",
}


def _union_misses(items: list[Any], schema: dict[str, Any]) -> list[Any]:
    """A value that fits no type of a union gives pydantic one error per type (`metadata.a.str`,
    `metadata.a.int`, ...). When each says only "not this type", they become one error at the value's
    place naming the types allowed there; otherwise the others (a limit, a validator's message) stay,
    at the value's place, without the type errors."""
    places: list[tuple[Any, ...] | None] = []
    unions: dict[tuple[Any, ...], tuple[dict[str, Any], str | None]] = {}
    for item in items:
        loc = tuple(item["loc"])
        found = _schema_at(schema, loc[:-1]) if len(loc) >= 2 and isinstance(loc[-1], str) else None
        members = _members(found[0]) if found else []
        if found and len([m for m in members if m.get("type") != "null"]) >= 2:
            places.append(loc[:-1])
            unions[loc[:-1]] = found
        else:
            places.append(None)
    result: list[Any] = []
    done: set[tuple[Any, ...]] = set()
    for item, place in zip(items, places, strict=True):
        if place is None:
            result.append(item)
        elif place not in done:
            done.add(place)
            group = [i for i, p in zip(items, places, strict=True) if p == place]
            others = [i for i in group if not _is_type_error(i)]
            if others:
                result += [{**i, "loc": place} for i in others]
            else:
                node, parent = unions[place]
                message = _union_miss(item.get("input"), node, parent, nested=len(place) > 1)
                result.append({"type": _UNION_MISS, "loc": place, "input": item.get("input"), "msg": message})
    return result


def _members(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The types of a union: ``anyOf``/``oneOf``, or a list of types (the compact form, ``schemas.py``)."""
    members = node.get("anyOf") or node.get("oneOf")
    if members:
        return list(members)
    kind = node.get("type")
    return [{"type": k} for k in kind] if isinstance(kind, list) else []


def _is_type_error(item: Any) -> bool:
    return str(item["type"]).endswith(("_type", "_parsing"))


def _union_miss(value: Any, node: dict[str, Any], parent: str | None, nested: bool) -> str:
    kinds = [m.get("type") for m in _members(node)]
    if parent and all(isinstance(k, str) and k in _PLURALS for k in kinds):
        if "number" in kinds:  # an integer is a number
            kinds = [k for k in kinds if k != "integer"]
        allowed = list(dict.fromkeys(_PLURALS[str(k)] for k in kinds))
        expected = f"{parent} must be " + (
            ", ".join(allowed[:-1]) + f" or {allowed[-1]}" if len(allowed) > 1 else allowed[0]
        )
    else:
        expected = f"expected {describe_type(node)}"
    problem = _NOT_ALLOWED.get(type(value))
    if problem is None:
        return f"{expected}, got {_short(value)}"
    return f"{problem if nested else problem.removeprefix('nested ')}; {expected}"


def _schema_at(schema: dict[str, Any], path: tuple[Any, ...]) -> tuple[dict[str, Any], str | None] | None:
    """The JSON schema of the value at ``path`` in the arguments, and what holds it: ``values`` of an
    object with free keys, ``items`` of an array, or None for a named field."""
    node: dict[str, Any] = schema
    parent: str | None = None
    for part in path:
        step: tuple[dict[str, Any], str | None] | None = None
        for option in _options(_resolve(node, schema), schema):
            if isinstance(part, int) and isinstance(option.get("items"), dict):
                step = (option["items"], "items")
            elif isinstance(part, str) and part in option.get("properties", {}):
                step = (option["properties"][part], None)
            elif isinstance(part, str) and isinstance(option.get("additionalProperties"), dict):
                step = (option["additionalProperties"], "values")
            if step:
                break
        if step is None:
            return None
        node, parent = step
    return _resolve(node, schema), parent


def _options(node: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    members = node.get("anyOf") or node.get("oneOf")
    return [_resolve(m, root) for m in members] if members else [node]


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return dict(root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {}))
    return node


def validation_summary(error: ValidationError) -> str:
    """A pydantic error from inside a tool (a pack checking its own data), without the dump."""
    parts = []
    for item in error.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in item["loc"]) or error.title
        parts.append(f"`{where}`: {_problem(item, None)}")
    return "; ".join(parts)


def _problem(item: Any, expected: str | None) -> str:
    message = str(item["msg"]).removeprefix("Value error, ")
    message = message[0].lower() + message[1:] if message else "invalid value"
    got = _short(item.get("input"))
    if expected and item["type"].endswith(("_type", "_parsing")):
        return f"expected {expected}, got {got}"
    return f"{message} (got {got})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)
