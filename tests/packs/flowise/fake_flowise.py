"""A fake Flowise 3.1.2 for the flowise pack's tests.

``FakeFlowise`` is a small real HTTP server on 127.0.0.1 that answers like Flowise 3.1.2: the node
catalog and the marketplace templates are the ones a real 3.1.2 server served (the shared
``flowise/live-3.1.2`` folder), the answers and error messages follow the real server (checked
against one; see ``test_servers.py``), and ``GET /validation/<id>`` ports Flowise 3.1.2's own check
(``fake_validation.py``), JavaScript semantics included.
It adds failure injection for breaker tests (``fail_next``, ``stop``/``start`` on the same port).
"""

from __future__ import annotations

import http
import json
import re
import secrets
import socket
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.conftest import SHARED
from tests.packs.flowise.fake_validation import (
    UNDEFINED,
    JSError,
    _get,
    _truthy,
    check_document_store_usage,
    check_flow_data,
    js_json_parse,
    v8_json_error,
    validate_flow_data,
)

FLOWISE_DATA = SHARED / "flowise"
LIVE_DATA = FLOWISE_DATA / "live-3.1.2"
TEMPLATES = FLOWISE_DATA / "marketplace-chatflows"


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def template(title: str) -> dict[str, Any]:
    """One of the 24 marketplace chatflows, by its title."""
    return load(TEMPLATES / f"{title}.json")


def real_catalog() -> dict[str, dict[str, Any]]:
    """The real Flowise 3.1.2 catalog, by node name."""
    return {n["name"]: n for n in load(LIVE_DATA / "nodes.json")}


VERSION = "3.1.2"

# Route -> permissions of which the key needs any (Flowise's checkPermission / checkAnyPermission).
_PERMISSIONS = {
    ("POST", "chatflows"): ("chatflows:create", "chatflows:update", "agentflows:create", "agentflows:update"),
    ("GET", "chatflows"): ("chatflows:view", "chatflows:update", "agentflows:view", "agentflows:update"),
    ("GET", "chatflow"): (
        "chatflows:view",
        "chatflows:update",
        "chatflows:delete",
        "agentflows:view",
        "agentflows:update",
        "agentflows:delete",
    ),
    ("PUT", "chatflow"): ("chatflows:create", "chatflows:update", "agentflows:create", "agentflows:update"),
    ("DELETE", "chatflow"): ("chatflows:delete", "agentflows:delete"),
    ("GET", "templates"): ("templates:marketplace",),
}

# Paths that need no key (Flowise's WHITELIST_URLS, the ones this fake serves).
_PERMISSIONS[("GET", "credentials")] = ("credentials:view", "credentials:create", "credentials:update")
_OPEN = ("/api/v1/ping", "/api/v1/version")
CHATFLOW_TYPES = ("CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT")
# uuid@10's validate(), which Flowise uses for chatflow ids.
_UUID = re.compile(
    r"^(?:[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
    r"|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$",
    re.I,
)
# Column order of Flowise's ChatFlow entity (a GET answers the row in this order).
_COLUMNS = (
    "id",
    "name",
    "flowData",
    "deployed",
    "isPublic",
    "apikeyid",
    "chatbotConfig",
    "apiConfig",
    "analytic",
    "speechToText",
    "textToSpeech",
    "followUpPrompts",
    "category",
    "type",
    "createdDate",
    "updatedDate",
    "workspaceId",
)
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


def _now() -> str:
    """A timestamp as Flowise's SQLite store gives it back: whole seconds, ``.000Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


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
    ``chatflows`` (id -> saved record), ``credentials`` (records as ``GET /credentials`` lists them),
    ``permissions`` (those of ``api_key``; None = any). ``requests`` lists the (method, path) pairs seen, path
    without the query string.
    """

    def __init__(self, api_key: str | None = None, port: int = 0):
        missing = live_data_missing()
        if missing:
            raise FileNotFoundError(missing)
        self.api_key = api_key or secrets.token_urlsafe(32)
        self.nodes: list[dict[str, Any]] = json.loads(_raw("nodes.json"))
        self.templates: list[dict[str, Any]] = json.loads(_raw("marketplaces_templates.json"))
        self.chatflows: dict[str, dict[str, Any]] = {}
        self.credentials: list[dict[str, Any]] = []
        self.permissions: set[str] | None = None
        self.workspace_id = str(uuid.uuid4())
        self.requests: list[tuple[str, str]] = []
        self._failures: list[tuple[int, str | None]] = []
        self._lock = threading.Lock()
        self._port = port
        self._server: _Server | None = None
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
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"fake-flowise-{self._port}", daemon=True
        )
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

    def fail_next(self, n: int = 1, status: int = 503, path: str | None = None) -> None:
        """The next ``n`` requests answer ``status`` (before auth): any request, or with ``path`` only those
        whose path starts with it (``"/marketplaces"`` and ``"/api/v1/marketplaces"`` alike)."""
        if path is not None and not path.startswith("/api/v1/"):
            path = "/api/v1/" + path.lstrip("/")
        with self._lock:
            self._failures.extend([(status, path)] * n)

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
            failure = None
            for i, (status, prefix) in enumerate(self._failures):
                if prefix is None or path.startswith(prefix):
                    failure = status
                    del self._failures[i]
                    break
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
        rest = path[len("/api/v1/") :].rstrip("/")
        try:
            return self._route("GET" if method == "HEAD" else method, rest, query, body)  # Express: HEAD is GET
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
            return _Reply(
                200,
                [{**t, "id": str(uuid.uuid4())} if isinstance(t, dict) and "id" in t else t for t in self.templates],
            )
        if head == "chatflows" and len(segments) <= 2:
            return self._chatflows(method, segments[1] if len(segments) == 2 else None, query, body)
        if method == "GET" and rest == "credentials":
            self._check("GET", "credentials")
            return _Reply(200, [{k: v for k, v in c.items() if k != "plainDataObj"} for c in self.credentials])
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
        """The request's JSON body as express.json() gives it; an array body has no fields."""
        text = body.decode("utf-8", errors="replace")
        if not text.strip(" \t\n\r"):
            return {}
        problem = v8_json_error(text)
        if problem:
            raise _error(400, problem)
        data = json.loads(text)
        return data if isinstance(data, dict) else {}

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
            return _Reply(200, {"data": flows[(page - 1) * limit : page * limit], "total": len(flows)})
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
    _headers_buffer: list[bytes]  # BaseHTTPRequestHandler's own, written whole in _send
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
        payload = (
            reply.body
            if isinstance(reply.body, str)
            else json.dumps(reply.body, ensure_ascii=False, separators=(",", ":"))
        )
        data = payload.encode("utf-8")
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        self._headers_buffer.append(b"\r\n")  # end_headers(), with the body in the same write
        if self.command != "HEAD":
            self._headers_buffer.append(data)
        self.flush_headers()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


__all__ = [
    "CHATFLOW_TYPES",
    "FLOWISE_DATA",
    "LIVE_DATA",
    "TEMPLATES",
    "UI_PAGE",
    "VERSION",
    "FakeFlowise",
    "live_data_missing",
    "load",
    "real_catalog",
    "template",
]
