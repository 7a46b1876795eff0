"""Flowise 3.1.2's flow validation for the fake Flowise, ported with JavaScript's semantics (===, truthiness,
undefined): ``validate_flow_data`` is what ``GET /validation/<id>`` reports
(``packages/server/src/services/validation/index.ts``, Apache-2.0), ``js_json_parse``/``v8_json_error`` are
``JSON.parse`` with V8's error messages (Node 20, as Flowise answers them), and ``check_flow_data``/
``check_document_store_usage`` are what Flowise does to a chatflow's flowData on save. ``JSError`` stands for
a TypeError in the JavaScript original (Flowise answers it as a 500).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any


class _Undefined:
    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()


class JSError(Exception):
    """What a TypeError in the JavaScript original would be; Flowise answers it as a 500."""


def _get(obj: Any, key: Any) -> Any:
    """``obj[key]`` in JavaScript: undefined when absent; a TypeError on null/undefined."""
    if obj is UNDEFINED or obj is None:
        raise JSError(f"Cannot read properties of {_js_str(obj)} (reading '{_js_str(key)}')")
    if isinstance(obj, dict):
        return obj.get(_js_str(key), UNDEFINED)
    if isinstance(obj, (list, str)):
        if key == "length":
            return len(obj)
        k = _js_str(key)
        if k.isdigit() and int(k) < len(obj):
            return obj[int(k)]
    return UNDEFINED


def _truthy(value: Any) -> bool:
    if value is UNDEFINED or value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True  # objects and arrays, empty ones included


def _strict_eq(a: Any, b: Any) -> bool:
    """``a === b`` (SameValueZero for includes()/Set, which differs only for NaN)."""
    if a is UNDEFINED or b is UNDEFINED:
        return a is b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is b  # objects compare by reference


def _js_str(value: Any) -> str:
    """``String(value)`` / a template literal's interpolation."""
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, list):
        return ",".join("" if v is None or v is UNDEFINED else _js_str(v) for v in value)
    return str(value)


def _entries(obj: Any) -> list[tuple[str, Any]]:
    """``Object.entries(obj)``."""
    if obj is UNDEFINED or obj is None:
        raise JSError("Cannot convert undefined or null to object")
    if isinstance(obj, dict):
        return list(obj.items())
    if isinstance(obj, (list, str)):
        return [(str(i), v) for i, v in enumerate(obj)]
    return []


def _for_of(obj: Any, expression: str) -> list[Any]:
    """``for (const x of obj)``."""
    if isinstance(obj, list):
        return obj
    if isinstance(obj, str):
        return list(obj)
    raise JSError(f"{expression} is not iterable")


def _for_each(obj: Any, expression: str) -> list[Any]:
    """``obj.forEach(...)``."""
    if isinstance(obj, list):
        return obj
    if obj is UNDEFINED or obj is None:
        raise JSError(f"Cannot read properties of {_js_str(obj)} (reading 'forEach')")
    raise JSError(f"{expression}.forEach is not a function")


def _includes(array: list[Any], value: Any) -> bool:
    return any(_strict_eq(item, value) or (_is_nan(item) and _is_nan(value)) for item in array)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _key(value: Any) -> tuple[Any, ...]:
    """A hashable stand-in for a Set member under SameValueZero."""
    if value is UNDEFINED:
        return ("undefined",)
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("nan",) if _is_nan(value) else ("number", float(value))
    if isinstance(value, str):
        return ("string", value)
    return ("object", id(value))


def _empty(value: Any) -> bool:
    return value is UNDEFINED or value is None or (isinstance(value, str) and value == "")


def _shown(param: dict[str, Any], values: Any) -> bool:
    """A param's ``show``/``hide`` against the node's inputs: every show key must match, a hide needs all."""
    show = _get(param, "show")
    if _truthy(show):
        for key, value in _entries(show):
            if not _strict_eq(_get(values, key), value):
                return False
    hide = _get(param, "hide")
    if _truthy(hide):
        hidden = True
        for key, value in _entries(hide):
            if not _strict_eq(_get(values, key), value):
                hidden = False
                break
        if hidden:
            return False
    return True


def _item_value(item: Any, condition_key: str) -> Any:
    if "$index" in condition_key:
        condition_key = re.sub(r"conditions\[\$index\]\.(\w+)", r"\1", condition_key, count=1)
    return _get(item, condition_key)


def _matches(expected: Any, actual: Any) -> bool:
    return _includes(expected, actual) if isinstance(expected, list) else _strict_eq(actual, expected)


def _array_item_shown(array_param: Any, item: Any) -> bool:
    """An array row's field: shown when ANY show condition matches, hidden when any hide one does."""
    shown = True
    show = _get(array_param, "show")
    if _truthy(show):
        shown = False
        for key, expected in _entries(show):
            if _matches(expected, _item_value(item, key)):
                shown = True
                break
    hide = _get(array_param, "hide")
    if shown and _truthy(hide):
        for key, expected in _entries(hide):
            if _matches(expected, _item_value(item, key)):
                return False
    return shown


def validate_flow_data(nodes: Any, edges: Any, component_nodes: dict[str, Any]) -> list[dict[str, Any]]:
    """The issues Flowise 3.1.2's ``GET /validation/<id>`` reports for a chatflow's nodes and edges.

    ``component_nodes`` maps node names to definitions as ``GET /nodes`` gives them (the server's
    nodesPool.componentNodes); it is used for ``<param>Config`` inputs. Raises ``JSError`` where the
    original would throw (the server then answers 500).
    """
    results: list[dict[str, Any]] = []
    connected: set[tuple[Any, ...]] = set()
    for edge in _for_each(edges, "edges"):
        connected.add(_key(_get(edge, "source")))
        connected.add(_key(_get(edge, "target")))

    for node in _for_of(nodes, "nodes"):
        data = _get(node, "data")
        if _strict_eq(_get(data, "name"), "stickyNoteAgentflow"):
            continue
        issues: list[str] = []
        if _key(_get(node, "id")) not in connected:
            issues.append("This node is not connected to anything")

        inputs = _get(data, "inputs")
        if _truthy(data) and _truthy(_get(data, "inputParams")) and _truthy(inputs):
            for param in _for_of(_get(data, "inputParams"), "node.data.inputParams"):
                if not _shown(param, inputs):
                    continue
                name = _get(param, "name")
                label = _js_str(_get(param, "label"))
                if not _truthy(_get(param, "optional")) and _empty(_get(inputs, name)):
                    issues.append(f"{label} is required")

                rows = _get(inputs, name)
                if _strict_eq(_get(param, "type"), "array") and isinstance(rows, list) and rows:
                    for index, item in enumerate(rows):
                        if not _truthy(_get(param, "array")):
                            continue
                        for array_param in _for_each(_get(param, "array"), "param.array"):
                            if not _array_item_shown(array_param, item):
                                continue
                            value = _get(item, _get(array_param, "name"))
                            if not _truthy(_get(array_param, "optional")) and (
                                _empty(value) or _strict_eq(value, "<p></p>")
                            ):
                                issues.append(
                                    f"{label} item #{index + 1}: {_js_str(_get(array_param, 'label'))} is required"
                                )

                if _strict_eq(name, "credential") and not _truthy(_get(param, "optional")):
                    if not _truthy(_get(inputs, name)):
                        issues.append("Credential is required")

                config_key = f"{_js_str(name)}Config"
                if _truthy(_get(inputs, config_key)) and _truthy(_get(inputs, name)):
                    component = component_nodes.get(_js_str(_get(inputs, name)))
                    config = _get(inputs, config_key)
                    if _truthy(component) and _truthy(_get(component, "inputs")):
                        for component_param in _for_of(_get(component, "inputs"), "componentInputParams"):
                            if not _shown(component_param, config):
                                continue
                            if not _truthy(_get(component_param, "optional")) and _empty(
                                _get(config, _get(component_param, "name"))
                            ):
                                issues.append(
                                    f"{label} configuration: {_js_str(_get(component_param, 'label'))} is required"
                                )
                        credential = _get(component, "credential")
                        if _truthy(credential) and not _truthy(_get(credential, "optional")):
                            if not _truthy(_get(config, "FLOWISE_CREDENTIAL_ID")) and not _truthy(
                                _get(config, "credential")
                            ):
                                issues.append(f"{label} requires a credential")

        if issues:
            results.append(_result(_get(node, "id"), _get(data, "label"), _get(data, "name"), issues))

    def find(node_id: Any) -> Any:
        if not isinstance(nodes, list):
            raise JSError("nodes.some is not a function")
        return next((n for n in nodes if _strict_eq(_get(n, "id"), node_id)), UNDEFINED)

    for edge in edges:
        source, target = _get(edge, "source"), _get(edge, "target")
        source_node, target_node = find(source), find(target)
        if source_node is not UNDEFINED and target_node is not UNDEFINED:
            continue
        if source_node is UNDEFINED and target_node is not UNDEFINED:
            _add_issue(results, target_node, f"Connected to non-existent source node {_js_str(source)}")
        elif source_node is not UNDEFINED:
            _add_issue(results, source_node, f"Connected to non-existent target node {_js_str(target)}")
        else:
            edge_id = _get(edge, "id")
            results.append(
                _result(
                    edge_id,
                    f"Edge {_js_str(edge_id)}",
                    "edge",
                    ["Disconnected edge - both source and target nodes do not exist"],
                )
            )
    return results


def _result(node_id: Any, label: Any, name: Any, issues: list[str]) -> dict[str, Any]:
    # JSON.stringify leaves out undefined values
    fields = {"id": node_id, "label": label, "name": name, "issues": issues}
    return {k: v for k, v in fields.items() if v is not UNDEFINED}


def _add_issue(results: list[dict[str, Any]], node: Any, issue: str) -> None:
    node_id = _get(node, "id")
    for result in results:
        if _strict_eq(result.get("id", UNDEFINED), node_id):
            result["issues"].append(issue)
            return
    data = _get(node, "data")
    results.append(_result(node_id, _get(data, "label"), _get(data, "name"), [issue]))


_SPECIAL = ("undefined", "NaN", "Infinity", "[object Object]")


class _Constant(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _Constant(name)


def _open_bracket(text: str, pos: int) -> tuple[str, bool]:
    """The innermost open bracket before pos, and whether a comma follows it at its level."""
    stack: list[str] = []
    commas: list[bool] = []
    in_string = escaped = False
    for ch in text[:pos]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append(ch)
            commas.append(False)
        elif ch in "]}" and stack:
            stack.pop()
            commas.pop()
        elif ch == "," and commas:
            commas[-1] = True
    return (stack[-1], commas[-1]) if stack else ("", False)


def _generic(text: str, pos: int) -> str:
    """V8's message for an unexpected token without a specific one."""
    if pos >= len(text):
        return "Unexpected end of JSON input"
    if text[pos] in "-0123456789":
        return f"Unexpected number in JSON at position {pos}"
    if text[pos] == '"':
        return f"Unexpected string in JSON at position {pos}"
    return _unexpected_token(text, pos)


def _unexpected_token(text: str, pos: int) -> str:
    token = text[pos]
    n = len(text)
    if n < 21:
        return f"Unexpected token '{token}', \"{text}\" is not valid JSON"
    if pos < 10:
        return f"Unexpected token '{token}', \"{text[: pos + 10]}\"... is not valid JSON"
    if pos < n - 10:
        return f"Unexpected token '{token}', ...\"{text[pos - 10 : pos + 10]}\"... is not valid JSON"
    return f"Unexpected token '{token}', ...\"{text[pos - 10 :]}\" is not valid JSON"


def v8_json_error(text: str) -> str:
    """V8's JSON.parse error message for ``text`` (Node 20, as Flowise answers it), or "" when it parses."""
    if text in _SPECIAL:
        return f'"{text}" is not valid JSON'
    try:
        json.loads(text, parse_constant=_reject_constant)
        return ""
    except _Constant as exc:
        name = str(exc)
        pos = text.find(name)
        if name.startswith("-"):
            return f"No number after minus sign in JSON at position {pos + 1}"
        return _unexpected_token(text, pos)
    except json.JSONDecodeError as error:
        msg, pos = error.msg, error.pos
    at = f" in JSON at position {pos}"
    if msg == "Expecting value":
        if not text[pos:].strip(" \t\n\r"):
            return "Unexpected end of JSON input"
        if text[pos] == "-":
            return f"No number after minus sign in JSON at position {pos + 1}"
        for literal in ("true", "false", "null"):
            if text[pos] == literal[0]:
                for i, expected in enumerate(literal):
                    if pos + i >= len(text):
                        return "Unexpected end of JSON input"
                    if text[pos + i] != expected:
                        return _unexpected_token(text, pos + i)
        return _unexpected_token(text, pos)
    if msg.startswith("Expecting property name"):
        before = text[:pos].rstrip(" \t\n\r")
        if before.endswith(","):
            return "Expected double-quoted property name" + at
        return "Expected property name or '}'" + at
    if msg == "Expecting ',' delimiter":
        if _open_bracket(text, pos)[0] == "[":
            return "Expected ',' or ']' after array element" + at
        return "Expected ',' or '}' after property value" + at
    if msg == "Expecting ':' delimiter":
        if _open_bracket(text, pos)[1]:  # not the object's first property
            return _generic(text, pos)
        return "Expected ':' after property name" + at
    if msg == "Extra data":
        return f"Unexpected non-whitespace character after JSON at position {pos}"
    if msg.startswith("Unterminated string"):
        return f"Unterminated string in JSON at position {len(text)}"
    if msg.startswith("Invalid control character"):
        return "Bad control character in string literal" + at
    if msg.startswith("Invalid \\"):
        return f"Bad escaped character in JSON at position {pos + 1}"
    return _unexpected_token(text, min(pos, len(text) - 1))


def js_json_parse(value: Any) -> Any:
    """``JSON.parse(value)``: the value is made a string first (undefined -> "undefined")."""
    text = value if isinstance(value, str) else _js_str(value)
    problem = v8_json_error(text)
    if problem:
        raise JSError(problem)
    return json.loads(text)


def check_flow_data(value: Any) -> Any:
    """What Flowise does to a chatflow's flowData on save (containsBase64File): parse it and walk the
    nodes, throwing where that throws. Returns the parsed flowData."""
    data = js_json_parse(value)
    for node in _for_of(_get(data, "nodes"), "nodes"):
        data_of_node = _get(node, "data")
        _get(data_of_node, "category")
    return data


def check_document_store_usage(value: Any) -> None:
    """What Flowise does to a chatflow's flowData before saving an update (_checkAndUpdateDocumentStoreUsage):
    parse it and look for a documentStore node, throwing where that throws."""
    nodes = _get(js_json_parse(value), "nodes")
    length = _get(nodes, "length")
    if isinstance(length, int) and length > 0:
        if not isinstance(nodes, list):
            raise JSError("nodes.find is not a function")
        for node in nodes:
            if _strict_eq(_get(_get(node, "data"), "name"), "documentStore"):
                break


__all__ = [
    "UNDEFINED",
    "JSError",
    "check_document_store_usage",
    "check_flow_data",
    "js_json_parse",
    "v8_json_error",
    "validate_flow_data",
]
