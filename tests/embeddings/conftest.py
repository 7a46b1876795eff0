"""Fixtures for the embedding tests: one ONNX export per test session, real HTTP servers."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentloom.core.breakers import BreakerRegistry
from agentloom.core.settings import EmbeddingSettings, Settings
from agentloom.embeddings import EmbeddingService


@pytest.fixture(scope="session")
def model_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache dir shared by the whole session, so the ONNX graph is built once."""
    return tmp_path_factory.mktemp("agentloom-cache")


@pytest.fixture(scope="session")
def onnx_file(model_cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the packaged model's graph once (no torch); return the ONNX path."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("export-data"), cache_dir=model_cache_dir)
    service = EmbeddingService(settings, BreakerRegistry())
    messages: list[str] = []
    service.prepare(progress=messages.append)
    files = list((model_cache_dir / "models").glob("*.onnx"))
    assert len(files) == 1, files
    assert any("building the ONNX graph" in m for m in messages), messages
    return files[0]


def make_settings(data_dir: Path, cache_dir: Path, **embeddings: Any) -> Settings:
    return Settings(data_dir=data_dir, cache_dir=cache_dir, embeddings=EmbeddingSettings(**embeddings))


@pytest.fixture
def settings(tmp_path: Path, model_cache_dir: Path) -> Settings:
    return make_settings(tmp_path / "data", model_cache_dir)


@pytest.fixture
def breakers() -> BreakerRegistry:
    return BreakerRegistry(failure_threshold=3, reset_timeout=300.0)


@pytest.fixture
def service(settings: Settings, breakers: BreakerRegistry) -> Iterator[EmbeddingService]:
    svc = EmbeddingService(settings, breakers)
    yield svc
    svc.close()


# -- a real HTTP server speaking the OpenAI and Ollama embedding wire formats ---------------
def fake_vector(text: str, dims: int) -> list[float]:
    """Deterministic, deliberately NOT normalised (the provider must normalise)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [((digest[i % len(digest)] - 128) / 16.0) + (i % 3) for i in range(dims)]


@dataclass
class ServerState:
    dims: int = 8
    mode: str = "ok"  # ok | shuffle | error:<status> | wrong_dims | slow
    api_key: str | None = "sk-test-secret-key-123"
    delay: float = 0.0
    record: bool = True  # keep every request in `requests` (off for tests that send thousands)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        state: ServerState = self.server.state
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if state.record:
            with state.lock:
                state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if state.delay:
            time.sleep(state.delay)
        if state.mode.startswith("error:"):
            status = int(state.mode.split(":")[1])
            self._send(status, {"error": {"message": f"simulated {status}", "type": "test"}})
            return
        if state.api_key is not None and self.headers.get("Authorization") != f"Bearer {state.api_key}":
            self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
            return
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        dims = state.dims - 2 if state.mode == "wrong_dims" else state.dims
        vectors = [fake_vector(t, dims) for t in texts]
        if self.path == "/api/embed":
            if body.get("model") != "nomic-embed-text":
                self._send(404, {"error": f'model "{body.get("model")}" not found, try pulling it first'})
                return
            self._send(200, {"model": body["model"], "embeddings": vectors})
            return
        if self.path != "/v1/embeddings":
            self._send(404, {"error": {"message": "no such route"}})
            return
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        if state.mode == "shuffle":
            data = list(reversed(data))
        self._send(200, {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 1}})


class _StateServer(ThreadingHTTPServer):
    state: ServerState  # what the handlers read as self.server.state


@pytest.fixture
def http_server() -> Iterator[tuple[str, ServerState]]:
    server = _StateServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.state = ServerState()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    assert isinstance(host, str)
    try:
        yield f"http://{host}:{port}", server.state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def closed_port_url() -> str:
    """A URL on which nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
