"""A small real model provider on loopback, speaking OpenAI's wire format, for Flowise's chat and embedding nodes.

Flowise's ``chatOpenAI`` and ``openAIEmbeddings`` nodes take a base path (``basepath``): pointed here, a
chatflow answers without the internet or an API key. The answers are deterministic and say what the model
was given, so a test can tell a chain from an agent from a retrieval flow:

- ``POST /v1/chat/completions``: with tools offered and a sum in the question, the first answer calls the
  calculator tool; after a tool result, the answer quotes it. Otherwise the answer is ``ANSWER_PREFIX`` and the
  question. Streaming (``"stream": true``, as the node asks by default) answers with server-sent events.
- ``POST /v1/embeddings``: a bag-of-words vector (words hashed into ``DIMENSIONS`` buckets), so texts that share
  words are near, as retrieval needs.
- ``GET /v1/models``; ``GET /pages/<name>``: a web page from ``pages`` (for a scraper node).
- Under ``refusing_base_path`` (``/refuse/v1``) every request answers 401 as OpenAI does for a wrong key, at once
  (clients retry a refused connection for a minute, but not a 401).

Every request body is kept in ``requests`` (path, JSON) for tests to inspect.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER_PREFIX = "Loopback model says:"
MODEL = "gpt-4o-mini"
DIMENSIONS = 64
SUM = re.compile(r"\d+(?:\s*[-+*/]\s*\d+)+")


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` (ASCII, one line), with a correct cross-reference table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def embed(text: str) -> list[float]:
    vector = [0.0] * DIMENSIONS
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.blake2b(word.encode(), digest_size=4).hexdigest(), 16) % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def reply_to(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for a chat-completions request: a tool call, a tool result quoted, or an answer."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    question = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    if last.get("role") == "tool":
        return {"role": "assistant", "content": f"{ANSWER_PREFIX} the tool answered {_text(last.get('content'))}"}
    calculator = next((t for t in tools if t and "calculator" in t.lower()), None)
    expression = SUM.search(question)
    if calculator and expression:
        call = {
            "id": f"call_{len(messages)}",
            "type": "function",
            "function": {"name": calculator, "arguments": json.dumps({"input": expression.group(0)})},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": f"{ANSWER_PREFIX} {question.strip()[:200]}"}


class ModelServer:
    """``with ModelServer() as server:`` listens on a free loopback port; ``server.base_path`` is for ``basepath``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.pages: dict[str, str] = {}
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="model-server", daemon=True)

    @property
    def base_path(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    @property
    def refusing_base_path(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/refuse/v1"

    def page(self, name: str, text: str) -> str:
        """Serve ``text`` as the body of an HTML page; returns its address."""
        self.pages[name] = f"<html><head><title>{name}</title></head><body><p>{text}</p></body></html>"
        return f"http://127.0.0.1:{self._http.server_address[1]}/pages/{name}"

    def seen(self, path: str) -> list[dict[str, Any]]:
        with self._lock:
            return [body for p, body in self.requests if p == path]

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append((path, body))

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read requests, not logs
            pass

        def do_GET(self) -> None:
            if self.path.startswith("/pages/") and self.path[len("/pages/") :] in server.pages:
                data = server.pages[self.path[len("/pages/") :]].encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "loopback"}]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                return
            path = self.path.split("?")[0].rstrip("/")
            server.record(path, body)
            if path.startswith("/refuse/"):
                refusal = {"message": "Incorrect API key provided.", "type": "invalid_request_error"}
                self._json(401, {"error": {**refusal, "code": "invalid_api_key"}})
            elif path.endswith("/chat/completions"):
                self._chat(body)
            elif path.endswith("/embeddings"):
                inputs = body.get("input")
                texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
                data = [{"object": "embedding", "index": i, "embedding": embed(str(t))} for i, t in enumerate(texts)]
                usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
                self._json(200, {"object": "list", "data": data, "model": body.get("model", MODEL), "usage": usage})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

        def _chat(self, body: dict[str, Any]) -> None:
            message = reply_to(body)
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
            base = {"id": f"chatcmpl-{time.monotonic_ns()}", "created": int(time.time()), "model": body.get("model")}
            if not body.get("stream"):
                choice = {"index": 0, "message": message, "finish_reason": finish}
                self._json(200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage})
                return
            delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
            if message.get("tool_calls"):
                delta["tool_calls"] = [{"index": 0, **call} for call in message["tool_calls"]]
            chunks = [
                {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]},
                {
                    **base,
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                },
                {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage},
            ]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


__all__ = ["ANSWER_PREFIX", "DIMENSIONS", "MODEL", "ModelServer", "embed", "reply_to", "tiny_pdf"]
