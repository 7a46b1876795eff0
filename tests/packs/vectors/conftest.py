"""Fixtures: a host with the vectors pack on embedded Chroma, or on a real `chroma run` server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from tests.conftest import free_port


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real Chroma server from the chromadb package's own CLI, on loopback."""
    chroma = shutil.which("chroma") or str(Path(__import__("sys").executable).with_name("chroma"))
    port = free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    log = (path / "server.log").open("w")
    proc = subprocess.Popen(
        [chroma, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(path / "db")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None, (path / "server.log").read_text()
            assert time.monotonic() < deadline, "chroma run did not start within 60 s"
            time.sleep(0.2)
    yield "127.0.0.1", port
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


def vectors_host(tmp_path: Path, **pack_settings: object) -> Host:
    """vector_add_files may read tmp_path unless the test says otherwise (file_roots=...)."""
    pack_settings.setdefault("file_roots", [str(tmp_path)])
    settings = Settings(data_dir=tmp_path / "data", packs=["vectors"], pack_settings={"vectors": pack_settings})
    return Host(settings, [ep for ep in discover_packs() if ep.name == "vectors"])


@pytest.fixture(params=["embedded", "remote"])
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, object]:
    if request.param == "embedded":
        return {"mode": "embedded"}
    host, port = request.getfixturevalue("chroma_server")
    return {"mode": "remote", "host": host, "port": port}


@pytest.fixture
def vhost(tmp_path: Path, store_settings: dict[str, object]) -> Host:
    """A host with only the vectors pack; tests connect an MCP client to its server."""
    return vectors_host(tmp_path, **store_settings)


@pytest.fixture
def name() -> str:
    """A fresh collection name (the remote server is shared by the whole session)."""
    return f"c-{uuid.uuid4().hex[:10]}"
