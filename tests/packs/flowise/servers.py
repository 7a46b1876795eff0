"""Flowise servers for the flowise pack's tests and benchmarks.

``FakeFlowise`` is a small real HTTP server on 127.0.0.1 that answers like Flowise 3.1.2: the node
catalog and the marketplace templates are the ones a real 3.1.2 server served (the shared
``flowise/live-3.1.2`` folder), the answers and error messages follow the real server (checked
against one; see ``test_servers.py``), and ``GET /validation/<id>`` ports Flowise 3.1.2's own check
(``packages/server/src/services/validation/index.ts``, Apache-2.0), JavaScript semantics included.
It adds failure injection for breaker tests (``fail_next``, ``stop``/``start`` on the same port).

``live_flowise`` runs the real Flowise 3.1.2 (``scripts/flowise-test-server.sh``) in its own process
group and bootstraps an API key the way a user without the UI would.
"""

from __future__ import annotations

import http
import json
import math
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx

from tests.conftest import REPO, SHARED

LIVE_DATA = SHARED / "flowise" / "live-3.1.2"
VERSION = "3.1.2"
SCRIPT = REPO / "scripts" / "flowise-test-server.sh"

# What an API key needs for everything the pack does. /nodes, /nodes/<name> and /validation/<id> check
# no permission in 3.1.2 (any valid key passes); templates:marketplace guards /marketplaces/templates.
API_KEY_PERMISSIONS = ["chatflows:create", "chatflows:view", "chatflows:update", "chatflows:delete",
                       "templates:marketplace"]

# Route -> permissions of which the key needs any (Flowise's checkPermission / checkAnyPermission).
_PERMISSIONS = {
    ("POST", "chatflows"): ("chatflows:create", "chatflows:update", "agentflows:create", "agentflows:update"),
    ("GET", "chatflows"): ("chatflows:view", "chatflows:update", "agentflows:view", "agentflows:update"),
    ("GET", "chatflow"): ("chatflows:view", "chatflows:update", "chatflows:delete", "agentflows:view",
                          "agentflows:update", "agentflows:delete"),
    ("PUT", "chatflow"): ("chatflows:create", "chatflows:update", "agentflows:create", "agentflows:update"),
    ("DELETE", "chatflow"): ("chatflows:delete", "agentflows:delete"),
    ("GET", "templates"): ("templates:marketplace",),
}

# Paths that need no key (Flowise's WHITELIST_URLS, the ones this fake serves).
_OPEN = ("/api/v1/ping", "/api/v1/version")
CHATFLOW_TYPES = ("CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT")
# uuid@10's validate(), which Flowise uses for chatflow ids.
_UUID = re.compile(r"^(?:[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
                   r"|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$", re.I)
# Column order of Flowise's ChatFlow entity (a GET answers the row in this order).
_COLUMNS = ("id", "name", "flowData", "deployed", "isPublic", "apikeyid", "chatbotConfig", "apiConfig", "analytic",
            "speechToText", "textToSpeech", "followUpPrompts", "category", "type", "createdDate", "updatedDate",
            "workspaceId")
_PROTECTED = ("id", "createdDate", "updatedDate", "runDate", "workspaceId", "organizationId")

# What Flowise answers for a path under /api/v1 that no route takes (e.g. /api/v1/nodes-list): the UI's page
# (flowise-ui 3.1.2 build/index.html, trimmed to its head and body; Apache-2.0).
UI_PAGE = """<!DOCTYPE html>
<html lang="en">
    <head>
        <title>Flowise - Build AI Agents, Visually</title>
        <link rel="icon" href="favicon.ico" />
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="title" content="Flowise - Build AI Agents, Visually" />
    </head>

    <body>
        <noscript>You need to enable JavaScript to run this app.</noscript>
        <div id="root"></div>
        <div id="portal"></div>
    </body>
</html>
"""

_RAW: dict[str, bytes] = {}


def _raw(name: str) -> bytes:
    """A file of the live answers, read once per process (the catalog is 0.7 MB, the templates 1.7 MB)."""
    if name not in _RAW:
        _RAW[name] = (LIVE_DATA / name).read_bytes()
    return _RAW[name]


def live_data_missing() -> str | None:
    """Why the live answers cannot be used, or None."""
    for name in ("nodes.json", "marketplaces_templates.json"):
        if not (LIVE_DATA / name).is_file():
            return f"Flowise live answers not found at {LIVE_DATA}: set AGENTLOOM_SHARED_DATA to the shared folder"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _now() -> str:
    """A timestamp as Flowise's SQLite store gives it back: whole seconds, ``.000Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


# --------------------------------------------------------------------------------------------------
# Flowise 3.1.2's flow validation, ported with JavaScript's semantics (===, truthiness, undefined)
# --------------------------------------------------------------------------------------------------

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
                                    _empty(value) or _strict_eq(value, "<p></p>")):
                                issues.append(f"{label} item #{index + 1}: "
                                              f"{_js_str(_get(array_param, 'label'))} is required")

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
                                    _get(config, _get(component_param, "name"))):
                                issues.append(f"{label} configuration: "
                                              f"{_js_str(_get(component_param, 'label'))} is required")
                        credential = _get(component, "credential")
                        if _truthy(credential) and not _truthy(_get(credential, "optional")):
                            if not _truthy(_get(config, "FLOWISE_CREDENTIAL_ID")) and not _truthy(
                                    _get(config, "credential")):
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
            results.append(_result(edge_id, f"Edge {_js_str(edge_id)}", "edge",
                                   ["Disconnected edge - both source and target nodes do not exist"]))
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
        return f"Unexpected token '{token}', \"{text[:pos + 10]}\"... is not valid JSON"
    if pos < n - 10:
        return f"Unexpected token '{token}', ...\"{text[pos - 10:pos + 10]}\"... is not valid JSON"
    return f"Unexpected token '{token}', ...\"{text[pos - 10:]}\" is not valid JSON"


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


# --------------------------------------------------------------------------------------------------
# The fake server
# --------------------------------------------------------------------------------------------------

class _Reply(Exception):
    def __init__(self, status: int, body: Any, content_type: str = "application/json; charset=utf-8"):
        super().__init__(status)
        self.status, self.body, self.content_type = status, body, content_type


def _error(status: int, message: str) -> _Reply:
    """Flowise's errorHandlerMiddleware answer."""
    return _Reply(status, {"statusCode": status, "success": False, "message": message, "stack": {}})


class FakeFlowise:
    """A fake Flowise 3.1.2 on 127.0.0.1 (see the module's docstring).

    State a test may change while it runs: ``nodes`` (the catalog, a list of definitions), ``templates``,
    ``chatflows`` (id -> saved record), ``permissions`` (those of ``api_key``; None = any). ``requests``
    lists the (method, path) pairs seen, path without the query string.
    """

    def __init__(self, api_key: str | None = None, port: int = 0):
        missing = live_data_missing()
        if missing:
            raise FileNotFoundError(missing)
        self.api_key = api_key or secrets.token_urlsafe(32)
        self.nodes: list[dict[str, Any]] = json.loads(_raw("nodes.json"))
        self.templates: list[dict[str, Any]] = json.loads(_raw("marketplaces_templates.json"))
        self.chatflows: dict[str, dict[str, Any]] = {}
        self.permissions: set[str] | None = None
        self.workspace_id = str(uuid.uuid4())
        self.requests: list[tuple[str, str]] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> FakeFlowise:
        """Listen (again, on the same port after ``stop``)."""
        if self._server is not None:
            return self
        handler = type("Handler", (_Handler,), {"fake": self})
        server = _Server(("127.0.0.1", self._port), handler)
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fake-flowise-{self._port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: connections are refused until ``start``."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
            server.close_connections()  # kept-alive connections too: an outage refuses everything
        if thread is not None:
            thread.join(5)

    def __enter__(self) -> FakeFlowise:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test helpers -----------------------------------------------------------------------------

    def fail_next(self, n: int = 1, status: int = 503) -> None:
        """The next ``n`` requests (any path, before auth) answer ``status``."""
        with self._lock:
            self._failures.extend([status] * n)

    def node(self, name: str) -> dict[str, Any]:
        """The catalog's definition of ``name`` (the object in ``nodes``, to change in place)."""
        for node in self.nodes:
            if node.get("name") == name:
                return node
        raise KeyError(name)

    def validate(self, flow_data: dict[str, Any] | str) -> list[dict[str, Any]]:
        """What ``GET /validation/<id>`` answers for a flow with this flowData (``JSError`` where it answers 500)."""
        data = js_json_parse(flow_data) if isinstance(flow_data, str) else flow_data
        return validate_flow_data(_get(data, "nodes"), _get(data, "edges"), self._component_nodes())

    def _component_nodes(self) -> dict[str, Any]:
        return {node["name"]: node for node in self.nodes if isinstance(node, dict) and "name" in node}

    # -- request handling (called by the handler threads) -----------------------------------------

    def _handle(self, method: str, raw_path: str, headers: Any, body: bytes) -> _Reply:
        parts = urlsplit(raw_path)
        path = unquote(parts.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            self.requests.append((method, path))
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            phrase = http.HTTPStatus(failure).phrase if failure in http.HTTPStatus._value2member_map_ else "Error"
            return _error(failure, phrase)

        if re.search(r"/api/v1/", path, re.I) and "/api/v1/" not in path:
            return _Reply(401, {"error": "Unauthorized Access"})
        if not path.startswith("/api/v1/"):
            return _Reply(200, UI_PAGE, "text/html; charset=UTF-8")
        if not any(path.startswith(p) for p in _OPEN):
            supplied = (headers.get("Authorization") or "").split("Bearer ")[-1]
            if not supplied or not secrets.compare_digest(supplied.encode(), self.api_key.encode()):
                return _Reply(401, {"error": "Unauthorized Access"})
        rest = path[len("/api/v1/"):].rstrip("/")
        try:
            return self._route(method, rest, query, body)
        except _Reply as reply:
            return reply

    def _check(self, method: str, route: str) -> None:
        wanted = _PERMISSIONS[(method, route)]
        if self.permissions is not None and not any(p in self.permissions for p in wanted):
            raise _Reply(403, {"message": "Forbidden"})

    def _route(self, method: str, rest: str, query: dict[str, str], body: bytes) -> _Reply:
        segments = rest.split("/") if rest else []
        head = segments[0] if segments else ""
        if method == "GET" and rest == "ping":
            return _Reply(200, "pong", "text/html; charset=utf-8")
        if method == "GET" and rest == "version":
            return _Reply(200, {"version": VERSION})
        if method == "GET" and head == "nodes" and len(segments) <= 2:
            if len(segments) == 1:
                return _Reply(200, self.nodes)
            name = segments[1]
            for node in self.nodes:
                if node.get("name") == name:
                    return _Reply(200, node)
            raise _error(500, f"Error: nodesService.getAllNodes - Node {name} not found")
        if method == "GET" and head == "nodes" and len(segments) == 3 and segments[1] == "category":
            return _Reply(200, [n for n in self.nodes if n.get("category") == segments[2]])
        if method == "GET" and rest == "marketplaces/templates":
            self._check("GET", "templates")
            # Flowise gives every template a new id on every call
            return _Reply(200, [{**t, "id": str(uuid.uuid4())} if isinstance(t, dict) and "id" in t else t
                                for t in self.templates])
        if head == "chatflows" and len(segments) <= 2:
            return self._chatflows(method, segments[1] if len(segments) == 2 else None, query, body)
        if method == "GET" and head == "validation" and len(segments) == 2:
            return self._validation(segments[1])
        # Express falls through to the UI's catch-all (e.g. GET /api/v1/nodes-list)
        return _Reply(200, UI_PAGE, "text/html; charset=UTF-8")

    def _chatflows(self, method: str, flow_id: str | None, query: dict[str, str], body: bytes) -> _Reply:
        if method == "GET" and flow_id is None:
            self._check("GET", "chatflows")
            return self._list(query)
        if method == "POST" and flow_id is None:
            self._check("POST", "chatflows")
            return self._create(self._json_body(body))
        route = "chatflow"
        if method not in ("GET", "PUT", "DELETE"):
            return _Reply(200, UI_PAGE, "text/html; charset=UTF-8")
        self._check(method, route)
        if flow_id is None:
            what = {"GET": "getChatflowById", "PUT": "updateChatflow", "DELETE": "deleteChatflow"}[method]
            raise _error(412, f"Error: chatflowsController.{what} - id not provided!")
        if method == "GET":
            return _Reply(200, self._row(self._get(flow_id)))
        if method == "PUT":
            return self._update(flow_id, self._json_body(body))
        try:
            self._get(flow_id)
        except _Reply as reply:
            raise _error(500, f"Error: chatflowsService.deleteChatflow - {reply.body['message']}") from None
        with self._lock:
            self.chatflows.pop(flow_id, None)
        return _Reply(200, {"raw": [], "affected": 1})

    @staticmethod
    def _json_body(body: bytes) -> dict[str, Any]:
        if not body.strip():
            return {}
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise _error(400, f"Unexpected token in JSON: {exc}") from None
        if not isinstance(data, dict):
            raise _error(400, "Unexpected JSON body: not an object")
        return data

    def _get(self, flow_id: str) -> dict[str, Any]:
        if not _UUID.match(flow_id):
            raise _error(400, "Invalid Chatflow ID")
        with self._lock:
            record = self.chatflows.get(flow_id)
        if record is None or record.get("workspaceId") != self.workspace_id:
            raise _error(404, f"Chatflow {flow_id} not found in the database!")
        return record

    def _list(self, query: dict[str, str]) -> _Reply:
        with self._lock:
            flows = [f for f in self.chatflows.values() if f.get("workspaceId") == self.workspace_id]
        kind = query.get("type")
        if kind in CHATFLOW_TYPES:
            flows = [f for f in flows if f.get("type") == kind]
        flows.sort(key=lambda f: str(f.get("updatedDate")), reverse=True)
        try:
            page, limit = int(query.get("page", -1)), int(query.get("limit", -1))
        except ValueError:
            page = limit = -1
        flows = [self._row(f) for f in flows]
        if page > 0 and limit > 0:
            return _Reply(200, {"data": flows[(page - 1) * limit:page * limit], "total": len(flows)})
        return _Reply(200, flows)

    @staticmethod
    def _columns(body: dict[str, Any]) -> dict[str, Any]:
        """The body as the ChatFlow entity keeps it: server-managed fields stripped, unknown ones dropped."""
        return {k: v for k, v in body.items() if k in _COLUMNS and k not in _PROTECTED}

    def _create(self, body: dict[str, Any]) -> _Reply:
        fields = self._columns(body)
        if fields.get("type") not in CHATFLOW_TYPES:
            raise _error(400, "Invalid Chatflow Type")
        try:
            check_flow_data(fields.get("flowData", UNDEFINED))
        except JSError as exc:
            raise _error(500, str(exc)) from None
        if fields.get("name") is None:
            raise _error(500, "SQLITE_CONSTRAINT: NOT NULL constraint failed: chat_flow.name")
        fields["workspaceId"] = self.workspace_id
        now = _now()
        # the answer's order: the given columns, the ones the insert filled with NULL, the generated ones
        record = {c: fields[c] for c in _COLUMNS if c in fields}
        record.update({c: None for c in _COLUMNS if c not in record and c not in _PROTECTED})
        record.update(id=str(uuid.uuid4()), createdDate=now, updatedDate=now)
        with self._lock:
            self.chatflows[record["id"]] = self._row(record)
        return _Reply(200, record)

    def _update(self, flow_id: str, body: dict[str, Any]) -> _Reply:
        record = self._get(flow_id)
        fields = self._columns(body)
        if _truthy(fields.get("flowData", UNDEFINED)):
            try:
                check_flow_data(fields["flowData"])
            except JSError as exc:
                raise _error(500, str(exc)) from None
        if "type" in fields and (_truthy(fields["type"]) or fields["type"] == ""):
            if fields["type"] not in CHATFLOW_TYPES:
                raise _error(400, "Invalid Chatflow Type")
        else:
            fields.pop("type", None)
        if _truthy(fields.get("chatbotConfig", UNDEFINED)):
            try:
                js_json_parse(fields["chatbotConfig"])
            except JSError as exc:
                raise _error(400, f"Invalid chatbotConfig: {exc}") from None
        merged = {**record, **fields}
        try:
            check_document_store_usage(merged.get("flowData"))
        except JSError as exc:
            raise _error(500, str(exc)) from None
        if merged.get("name") is None:
            raise _error(500, "SQLITE_CONSTRAINT: NOT NULL constraint failed: chat_flow.name")
        merged["updatedDate"] = _now()
        with self._lock:
            record.update(merged)
        return _Reply(200, self._row(record))

    @staticmethod
    def _row(record: dict[str, Any]) -> dict[str, Any]:
        """A saved chatflow as Flowise reads it back: the entity's columns in order."""
        return {c: record[c] for c in _COLUMNS if c in record}

    def _validation(self, flow_id: str) -> _Reply:
        prefix = "Error: validationService.checkFlowValidation - "
        with self._lock:
            record = self.chatflows.get(flow_id)
        if record is None or record.get("workspaceId") != self.workspace_id:
            raise _error(500, f"{prefix}{prefix}flow not found!")
        try:
            data = js_json_parse(record.get("flowData"))
            return _Reply(200, validate_flow_data(_get(data, "nodes"), _get(data, "edges"), self._component_nodes()))
        except JSError as exc:
            raise _error(500, prefix + str(exc)) from None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *args: Any) -> None:
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(*args)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.connections_lock:
            connections, self.connections = self.connections, set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    fake: FakeFlowise
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every kept-alive answer waits ~40 ms for a delayed ACK
    server_version = "FakeFlowise/" + VERSION
    sys_version = ""

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            reply = self.fake._handle(self.command, self.path, self.headers, body)
        except Exception as exc:  # a bug in the fake must not hang the client
            reply = _error(500, f"FakeFlowise: {type(exc).__name__}: {exc}")
        payload = reply.body if isinstance(reply.body, str) else json.dumps(
            reply.body, ensure_ascii=False, separators=(",", ":"))
        data = payload.encode("utf-8")
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        if self.command != "HEAD":
            self._headers_buffer.append(data)  # one write: headers and body
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


# --------------------------------------------------------------------------------------------------
# The real Flowise
# --------------------------------------------------------------------------------------------------

class FlowiseUnavailable(RuntimeError):
    """The real Flowise could not be started or bootstrapped."""


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def bootstrap_api_key(url: str, *, email: str = "agentloom-tests@example.com", password: str = "Agentloom-Test-1",
                      key_name: str = "agentloom-tests", permissions: list[str] | None = None,
                      timeout: float = 30) -> str:
    """An API key on a fresh Flowise 3.x without the UI: register, log in (cookies), create a key.

    The key answer is the workspace's list of keys; the bearer value is the new one's ``apiKey``.
    """
    with httpx.Client(base_url=f"{url}/api/v1", timeout=timeout) as client:
        reply = client.post("/account/register",
                            json={"user": {"name": "agentloom tests", "email": email, "credential": password}})
        if reply.status_code >= 400 and "only have one organization" not in reply.text:
            raise FlowiseUnavailable(f"register: HTTP {reply.status_code} {reply.text[:300]}")
        reply = client.post("/auth/login", json={"email": email, "password": password})
        if reply.status_code != 200:
            raise FlowiseUnavailable(f"login: HTTP {reply.status_code} {reply.text[:300]}")
        reply = client.post("/apikey", json={"keyName": key_name, "permissions": permissions or API_KEY_PERMISSIONS},
                            headers={"x-request-from": "internal"})
        if reply.status_code != 200:
            raise FlowiseUnavailable(f"apikey: HTTP {reply.status_code} {reply.text[:300]}")
        answer = reply.json()
        keys = answer if isinstance(answer, list) else answer.get("data", [answer])
        for key in keys:
            if key.get("keyName") == key_name and key.get("apiKey"):
                return str(key["apiKey"])
        raise FlowiseUnavailable(f"apikey: no key named {key_name} in {str(answer)[:300]}")


def flowise_home() -> Path:
    """Where scripts/flowise-test-server.sh installs Flowise (its FLOWISE_HOME)."""
    home = os.environ.get("FLOWISE_HOME")
    return Path(home) if home else Path.home() / ".cache" / "agentloom" / f"flowise-{VERSION}"


@contextmanager
def live_flowise(workdir: Path, timeout: float = 240, *, install: bool = False) -> Iterator[tuple[str, str]]:
    """A real Flowise 3.1.2 on a free port with its data under ``workdir``: yields (url, api_key).

    Runs ``scripts/flowise-test-server.sh start`` in its own process group (log: ``workdir/flowise.log``)
    and kills the group on exit. Raises ``FlowiseUnavailable`` with the log's tail when it does not come up,
    and at once when Flowise is not installed (``install=True`` lets the script install it first, which
    takes about 10 minutes: give a ``timeout`` to match).
    """
    if not install and not (flowise_home() / ".installed").is_file():
        raise FlowiseUnavailable(f"Flowise {VERSION} is not installed in {flowise_home()}: "
                                 "run scripts/flowise-test-server.sh install (about 10 min, 3 GB)")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = workdir / "flowise.log"
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(["bash", str(SCRIPT), "start", str(workdir / "server"), str(port)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=REPO)
        except OSError as exc:
            raise FlowiseUnavailable(f"cannot run {SCRIPT}: {exc}") from exc
    try:
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while True:
            if proc.poll() is not None:
                raise FlowiseUnavailable(f"Flowise exited with code {proc.returncode} before answering; "
                                         f"last lines of {log_path}:\n{_tail(log_path)}")
            try:
                if httpx.get(f"{url}/api/v1/ping", timeout=2).text == "pong":
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise FlowiseUnavailable(f"Flowise did not answer /api/v1/ping within {timeout:.0f} s; "
                                         f"last lines of {log_path}:\n{_tail(log_path)}")
            time.sleep(0.5)
        with open(log_path, "a", encoding="utf-8") as log_text:
            log_text.write(f"\n[live_flowise] ready after {time.monotonic() - started:.1f} s\n")
        try:
            api_key = bootstrap_api_key(url)
        except (httpx.HTTPError, FlowiseUnavailable) as exc:
            raise FlowiseUnavailable(f"API key bootstrap failed: {exc}; last lines of {log_path}:\n"
                                     f"{_tail(log_path)}") from exc
        yield url, api_key
    finally:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
    # children of node (none expected) that outlived it
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def flow_summary(issues: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Validation issues as {node id: issues}, for comparing two answers."""
    return {str(item.get("id")): list(item.get("issues", [])) for item in issues}


__all__ = ["API_KEY_PERMISSIONS", "FakeFlowise", "FlowiseUnavailable", "JSError", "LIVE_DATA", "UI_PAGE",
           "bootstrap_api_key", "check_document_store_usage", "check_flow_data", "js_json_parse", "v8_json_error", "flow_summary", "flowise_home", "free_port", "live_data_missing", "live_flowise",
           "validate_flow_data"]
