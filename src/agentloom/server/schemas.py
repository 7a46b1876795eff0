"""What ``tools/list`` says of a tool, said once: every agent reads it in every conversation.

pydantic's JSON schemas carry what a model does not need to call a tool right: a ``title`` on
every property and model ("Chatflow Id" beside ``chatflow_id``), ``anyOf`` with a null branch for
each optional value, ``additionalProperties: true`` (the default), ``default: null`` (or false, for
a flag) on arguments that are not required, and ``$defs`` for models used once.
:func:`compact_schema` rewrites them into the equivalent shorter form: a value accepted before is
accepted after, and nothing else is, so the server's argument check and what a client may send
are unchanged. :func:`compact_output_schema` also leaves out what only a validator reads (which
keys are ``required``, a ``type`` that ``properties`` or ``items`` already say): every reply still
matches, which the SDK client checks on each call. :func:`compact_annotations` leaves out hints
the MCP specification already assumes, and :func:`clean_description` the indentation and line
wrapping a docstring keeps from the code.

A change here changes what is listed: bump :data:`FORMAT`, which keys the tool cache
(``toolcache``), so definitions saved under an older rule are not listed again.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from mcp_types import ToolAnnotations

FORMAT = 2

# Keys whose value is a map of names to schemas, not a schema: a property may be called "title".
_NAME_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_DEF_PREFIX = "#/$defs/"
_KEEPS_ITS_LINE = re.compile(r"\s|[-*+] |\d+[.)] |>")  # indented, a list item, a quote
_IMPLIED = {"object": ("properties", "additionalProperties"), "array": ("items",)}  # keywords that say the type


def clean_description(text: str | None) -> str:
    """A docstring as a model reads it: no indentation from the code, no blank edges, and each
    paragraph on one line (the docstring's wrapping is the code's line length, not meaning). A
    line that starts a list item or is indented stays on its own line."""
    lines = inspect.cleandoc(text or "").split("\n")
    out: list[str] = []
    for line in lines:
        if out and out[-1] and line and not _KEEPS_ITS_LINE.match(line):
            out[-1] += " " + line
        else:
            out.append(line)
    return "\n".join(out)


def compact_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """``schema`` without pydantic's redundancy; equivalent for validation."""
    if schema is None:
        return None
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    uses = _count_refs(schema)
    inline = {name for name in defs if uses.get(name, 0) == 1 and not _reaches(name, name, defs, set())}
    out: dict[str, Any] = _compact(schema, defs, inline, ())
    if out.get("properties") == {} and out.get("additionalProperties") is False and "required" not in out:
        del out[
            "properties"
        ]  # MCP's own form for a tool without arguments: {type: object, additionalProperties: false}
    kept = {name: body for name, body in out.pop("$defs", {}).items() if name not in inline}
    if kept:
        out["$defs"] = kept
    return out


def compact_output_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """An output schema as :func:`compact_schema`, and without what only a validator needs: which
    keys are ``required``, and ``type`` where ``properties`` or ``items`` already say object or
    array (the root keeps ``type: object``, which MCP asks for). Every reply that matched still
    matches; a model reads the reply itself, and the description says what is optional."""
    out = compact_schema(schema)
    if out is None:
        return None
    lean: dict[str, Any] = _lean(out)
    lean["type"] = out.get("type", "object")
    return lean


def _lean(node: Any) -> Any:
    if isinstance(node, list):
        return [_lean(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "required" and isinstance(value, list):
            continue
        if key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {name: _lean(sub) for name, sub in value.items()}
        else:
            out[key] = _lean(value)
    kind = out.get("type")
    implied = _IMPLIED.get(kind, ()) if isinstance(kind, str) else ()
    if any(k in out for k in implied):
        del out["type"]
    return out


def reply_of(tool: str) -> Callable[[dict[str, Any]], None]:
    """A reply type's ``json_schema_extra`` when its tool answers as ``tool`` does: tools/list says each thing
    once, so the output schema names that tool instead of listing the same keys again (replies still match)."""

    def listed(schema: dict[str, Any]) -> None:
        schema["properties"] = {}
        schema["description"] = f"{tool}'s reply"

    return listed


def compact_annotations(annotations: ToolAnnotations | None) -> ToolAnnotations | None:
    """The hints that differ from the specification's defaults (readOnlyHint false, destructiveHint
    true, idempotentHint false, openWorldHint true), except that a tool that changes things keeps
    destructiveHint and openWorldHint even when true: a client that reads a missing hint as false
    would otherwise be less careful than the specification means. destructive and idempotent say
    nothing of a read-only tool."""
    if annotations is None:
        return None
    keep: dict[str, Any] = {"title": annotations.title}
    if annotations.read_only_hint:
        keep["read_only_hint"] = True
        if annotations.open_world_hint is False:
            keep["open_world_hint"] = False
    else:
        keep["destructive_hint"] = annotations.destructive_hint
        if annotations.idempotent_hint:
            keep["idempotent_hint"] = True
        keep["open_world_hint"] = annotations.open_world_hint
    return ToolAnnotations(**{k: v for k, v in keep.items() if v is not None})


def _compact(node: Any, defs: dict[str, Any], inline: set[str], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_compact(item, defs, inline, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEF_PREFIX) and ref[len(_DEF_PREFIX) :] in inline:
        name = ref[len(_DEF_PREFIX) :]
        if name not in seen:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return _compact({**defs[name], **siblings}, defs, inline, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if (key == "additionalProperties" and value is True) or (key == "items" and value == {}):
            continue  # what JSON Schema assumes without them
        if key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {name: _compact(sub, defs, inline, seen) for name, sub in value.items()}
        else:
            out[key] = _compact(value, defs, inline, seen)
    if "properties" in out:
        required = set(out.get("required", []))
        for name, prop in out["properties"].items():
            if name in required or not isinstance(prop, dict) or "default" not in prop:
                continue
            if prop["default"] is None or (prop["default"] is False and prop.get("type") == "boolean"):
                del prop["default"]  # not given means null, or a flag that is off: saying so adds nothing
    out = _merge_null(out)
    kind = out.get("type")
    if isinstance(kind, str) and isinstance(out.get("enum"), list) and all(_is_type(v, kind) for v in out["enum"]):
        del out["type"]  # the values say it
    if isinstance(kind, list) and "integer" in kind and "number" in kind:
        kept = [k for k in kind if k != "integer"]  # an integer is a number
        out["type"] = kept[0] if len(kept) == 1 else kept
    return out


def _merge_null(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [{type: T, ...}, {type: null}]`` as ``type: [T, null]`` when the branches combine
    losslessly: each branch has a plain type, and at most one has keywords of its own (keywords such
    as ``items`` or ``properties`` apply only to values of their type). An enum or null is an enum
    with null among its values."""
    options = node.get("anyOf")
    if not isinstance(options, list) or len(options) < 2 or "type" in node or "enum" in node:
        return node
    if len(options) == 2 and {"type": "null"} in options:
        other = options[1 - options.index({"type": "null"})]
        plain_enum = isinstance(other, dict) and set(other) <= {"enum", "type"} and isinstance(other.get("enum"), list)
        if plain_enum and ("type" not in other or all(_is_type(v, other["type"]) for v in other["enum"])):
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return {"enum": [*other["enum"], None], **rest}
    types: list[str] = []
    extra: dict[str, Any] = {}
    for option in options:
        if not isinstance(option, dict) or not isinstance(option.get("type"), str):
            return node
        rest = {k: v for k, v in option.items() if k != "type"}
        if any(k in rest for k in ("enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref", "if")):
            return node
        if rest and extra:
            return node
        if option["type"] in types:
            return node
        types.append(option["type"])
        extra = extra or rest
    merged = {k: v for k, v in node.items() if k != "anyOf"}
    return {"type": types, **extra, **merged}


def _is_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return False


def _count_refs(node: Any, counts: dict[str, int] | None = None) -> dict[str, int]:
    counts = {} if counts is None else counts
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEF_PREFIX):
            counts[ref[len(_DEF_PREFIX) :]] = counts.get(ref[len(_DEF_PREFIX) :], 0) + 1
        for value in node.values():
            _count_refs(value, counts)
    elif isinstance(node, list):
        for item in node:
            _count_refs(item, counts)
    return counts


def _reaches(start: str, target: str, defs: dict[str, Any], visited: set[str]) -> bool:
    """Whether the definition ``start`` refers, directly or not, to ``target`` (a recursive model)."""
    for name in _count_refs(defs.get(start, {})):
        if name == target:
            return True
        if name not in visited:
            visited.add(name)
            if _reaches(name, target, defs, visited):
                return True
    return False
