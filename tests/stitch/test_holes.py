"""The holes of issue 40, one regression test each: webhook hosts judged as the HTTP client
connects to them, worker answers bounded in size and time, lone surrogates in keys, webhooks
left pending by a killed server, non-numeric node positions, and the MCP tools' messages.
Real server processes and workers, SQLite and PostgreSQL."""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client import Client
from sqlalchemy import create_engine, text

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from agentloom.stitch.db import normalise_url
from tests.server.clients import error
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.test_api import create, start, wait_until
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

TIMEOUT = 2.0  # STITCH_WORKER_TIMEOUT of the servers that send to the slow workers here


def one_worker(url: str, **data: Any) -> dict[str, Any]:
    b = Builder(url)
    b.node("Worker", "w", **data)
    return b.graph()


def save(server: StitchServer, graph: dict[str, Any]) -> httpx.Response:
    return server.http.post("/flows", json={"name": "f", "graph": graph})


def post_raw(server: StitchServer, path: str, body: bytes) -> httpx.Response:
    return server.http.post(path, content=body, headers={"Content-Type": "application/json"})


def no_traceback(server: StitchServer) -> None:
    log = server.log.read_text(errors="replace")
    assert "Exception in ASGI application" not in log and "Traceback" not in log, log[-3000:]


@pytest.fixture
def strict(database_url: str, tmp_path: Path) -> Iterator[StitchServer]:
    """A server that refuses every webhook target that is not a public address."""
    server = StitchServer(database_url, tmp_path)
    server.env.update(STITCH_WEBHOOK_DENY_PRIVATE="true")
    server.start()
    yield server
    server.stop()


# -- 1. webhook targets, as the client reads them ----------------------------------------------


@pytest.mark.slow
def test_webhook_hosts_are_judged_as_the_client_reads_them_when_saved(strict: StitchServer, worker: Worker) -> None:
    refused = {
        "http://169。254。169。254/latest/meta-data/": "169.254.169.254, a cloud metadata address",
        "http://１６９.２５４.１６９.２５４/": "169.254.169.254, a cloud metadata address",
        f"http://１２７.0.0.1:{worker.port}/work": "127.0.0.1, not a public address",
        f"http://127。0。0。1:{worker.port}/work": "127.0.0.1, not a public address",
        "http://169.254.169.254./": "169.254.169.254, a cloud metadata address",
        f"http://[::ffff:127.0.0.1]:{worker.port}/work": "not a public address",
        f"http://2130706433:{worker.port}/work": "legacy numeric form",
        f"http://0177.0.0.1:{worker.port}/work": "legacy numeric form",
        "http://0xa9fea9fe/": "legacy numeric form",
    }
    for url, why in refused.items():
        response = save(strict, one_worker(url))
        assert response.status_code == 422, (url, response.text)
        assert "data.webhookUrl" in response.text and why in response.text, (url, response.text)
    assert strict.http.get("/flows").json() == []


@pytest.mark.slow
def test_a_webhook_is_refused_at_send_time_by_the_address_the_client_connects_to(
    database_url: str, tmp_path: Path, worker: Worker
) -> None:
    """Saved while loopback (and the integer form) were allowed, sent by a server that refuses
    them: the fullwidth form of 127.0.0.1 is refused by the address aiohttp would connect to,
    the integer form is never sent (aiohttp refuses it)."""
    why = {
        f"http://１２７.0.0.1:{worker.port}/work": "refused: 127.0.0.1, not a public address",
        f"http://2130706433:{worker.port}/work": "not a canonical IPv4 address",
    }
    urls = list(why)
    lenient = StitchServer(database_url, tmp_path)
    lenient.env.update(STITCH_WEBHOOK_ALLOW="2130706433")  # else an integer form is refused when saved
    lenient.start()
    try:
        flows = [create(lenient, one_worker(url)) for url in urls]
    finally:
        lenient.stop()
    strict = StitchServer(database_url, tmp_path)
    strict.env.update(STITCH_WEBHOOK_DENY_PRIVATE="true")
    strict.start()
    try:
        for url, flow_id in zip(urls, flows, strict=True):
            run = strict.wait_for(start(strict, flow_id, 1))
            error = run["node_states"]["w"]["error"]
            assert run["status"] == "failed" and why[url] in error, error
        wait_until(lambda: strict.http.get("/health").json()["pending_dispatches"] == 0)  # nothing left to send
        assert worker.received == []  # nothing reached the loopback worker
        no_traceback(strict)
    finally:
        strict.stop()


# -- 2. worker answers: bounded in size and in time, one delivery per attempt ------------------


class RawWorker:
    """A bare HTTP/1.1 worker on a socket: answers each webhook 200 with a body it sends
    ``trickle`` (one byte a second, at most ``size``) or ``flood`` (as fast as the socket takes
    it, ``size`` bytes announced), notes when Stitch closed the connection and how many body
    bytes it took, then posts the completed callback. A trickle sends a byte a second by this worker's
    own clock, so ``sent_bytes`` says how long Stitch kept reading."""

    def __init__(self, mode: str, size: int) -> None:
        self.mode, self.size = mode, size
        self.received: list[dict[str, Any]] = []
        self.sent_bytes = 0
        self.closed = False  # Stitch closed the connection (or took the whole answer)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/work"
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> RawWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                body += conn.recv(65536)
            payload = json.loads(body)
            self.received.append(payload)
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {self.size}\r\n\r\n".encode())
            if self.mode == "trickle":
                self._trickle(conn)
            else:
                self._flood(conn)
            self.closed = True
        httpx.post(payload["callbackUrl"], json={"status": "completed", "output": payload["input"]}, timeout=30)

    def _trickle(self, conn: socket.socket) -> None:
        for _ in range(self.size):
            readable, _, _ = select.select([conn], [], [], 1.0)
            if readable and conn.recv(1) == b"":
                return  # Stitch closed the connection
            conn.sendall(b"x")
            self.sent_bytes += 1

    def _flood(self, conn: socket.socket) -> None:
        chunk = b"x" * 65536
        try:
            while self.sent_bytes < self.size:
                self.sent_bytes += conn.send(chunk[: self.size - self.sent_bytes])
        except OSError:
            return  # Stitch closed the connection


@pytest.mark.slow
def test_a_worker_trickling_its_answer_gets_the_webhook_once_and_the_send_ends_in_time(
    database_url: str, tmp_path: Path
) -> None:
    server = StitchServer(database_url, tmp_path, worker_timeout=TIMEOUT).start()
    try:
        with RawWorker("trickle", size=120) as slow:
            run_id = start(server, create(server, one_worker(slow.url)), 5)
            # The send ends at the worker timeout, however slowly the body keeps coming: long before the
            # body's 120 bytes, a byte a second (five times the timeout's worth, for a loaded machine).
            wait_until(lambda: slow.closed, timeout=120)
            assert slow.sent_bytes <= 5 * TIMEOUT, slow.sent_bytes
            run = server.wait_for(run_id)
            assert run["status"] == "completed" and run["node_states"]["w"]["output"] == 5
            # Once nothing is pending, nothing can be sent again.
            wait_until(lambda: server.http.get("/health").json()["pending_dispatches"] == 0, timeout=60)
            assert len(slow.received) == 1
    finally:
        server.stop()


@pytest.mark.slow
def test_a_worker_answering_a_huge_body_is_read_only_up_to_the_cap(database_url: str, tmp_path: Path) -> None:
    huge = 256 * 1024 * 1024
    server = StitchServer(database_url, tmp_path, worker_timeout=TIMEOUT)
    server.env.update(STITCH_WORKER_MAX_RESPONSE_BYTES="65536")
    server.start()
    try:
        with RawWorker("flood", size=huge) as flood:
            run = server.wait_for(start(server, create(server, one_worker(flood.url)), 3))
            assert run["status"] == "completed", run["node_states"]
            wait_until(lambda: flood.closed, timeout=120)
            # Stitch closed the connection after its 64 KiB: what got out is the socket buffers' worth.
            assert flood.sent_bytes < 32 * 1024 * 1024, flood.sent_bytes
            assert len(flood.received) == 1
    finally:
        server.stop()


# -- 3. lone surrogates in keys ----------------------------------------------------------------


@pytest.mark.slow
def test_a_lone_surrogate_in_a_key_is_a_422_naming_it_without_a_traceback(stitch: StitchServer, worker: Worker) -> None:
    run_id = start(stitch, create(stitch, one_worker(worker.url, mode="never")), 1)
    callback_url = wait_until(lambda: worker.received and worker.received[0]["callbackUrl"])
    callback_path = callback_url.split("/api/stitch", 1)[1]
    flow = json.dumps({"name": "f", "graph": one_worker(worker.url)})
    cases = [
        (f"/flows/{stitch.http.get('/flows').json()[0]['id']}/runs", b'{"input": {"\\ud800": 1}}', "$.input"),
        ("/flows", flow.replace('"webhookUrl"', '"\\udc00": 1, "webhookUrl"').encode(), "$.graph.nodes[0].data"),
        (callback_path, b'{"status": "completed", "output": {"ok": {"\\udbff": 2}}}', "$.output.ok"),
    ]
    for path, body, where in cases:
        response = post_raw(stitch, path, body)
        assert response.status_code == 422, (path, response.text)
        (problem,) = response.json()["detail"]
        assert problem["msg"].startswith(where) and "the key contains a lone surrogate" in problem["msg"], problem
        assert problem["loc"][-1] in ("\\ud800", "\\udc00", "\\udbff")  # named, escaped
    assert stitch.http.get(f"/runs/{run_id}").json()["node_states"]["w"]["status"] == "running"  # callback refused
    no_traceback(stitch)


# -- 4. webhooks left pending by a killed server -----------------------------------------------


@pytest.mark.slow
def test_webhooks_of_finished_attempts_left_pending_by_a_kill_are_settled_not_resent(
    database_url: str, tmp_path: Path, worker: Worker
) -> None:
    server = StitchServer(database_url, tmp_path).start()
    run = server.wait_for(start(server, create(server, one_worker(worker.url)), 4))
    assert run["status"] == "completed"
    server.kill()  # kill -9
    # What a kill between the callback's commit and the batched sent mark leaves: the webhook
    # of a completed attempt still pending, its lease run out.
    engine = create_engine(normalise_url(database_url))
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE stitch_outbox SET state = 'pending', lease_until = 0"))
        restarted = StitchServer(database_url, tmp_path).start()
        try:

            def state() -> str:
                with engine.connect() as conn:
                    return str(conn.execute(text("SELECT state FROM stitch_outbox")).scalar_one())

            wait_until(lambda: state() != "pending", timeout=60)
            assert state() == "skipped"  # settled without a send: a skipped webhook is never sent
            assert restarted.http.get("/health").json()["pending_dispatches"] == 0
            assert worker.keys() == ["w"]  # not sent again
        finally:
            restarted.stop()
    finally:
        engine.dispose()


# -- 5. node positions are numbers -------------------------------------------------------------


@pytest.mark.slow
def test_a_node_position_that_is_not_a_number_is_refused(stitch: StitchServer) -> None:
    for position, field, shown in (
        ({"x": 0, "y": False}, "position.y", "false"),
        ({"x": "1", "y": 0}, "position.x", '"1"'),
    ):
        graph = one_worker("http://127.0.0.1:9/work")
        graph["nodes"][0]["position"] = position
        response = save(stitch, graph)
        assert response.status_code == 422, response.text
        (problem,) = response.json()["detail"]
        assert f"node 'w': {field} must be a number, not {shown}" in problem["msg"], problem
    assert stitch.http.get("/flows").json() == []
    graph = one_worker("http://127.0.0.1:9/work")
    graph["nodes"][0]["position"] = {"x": 3, "y": -2.5}
    saved = save(stitch, graph).json()
    assert saved["graph"]["nodes"][0]["position"] == {"x": 3.0, "y": -2.5}


# -- 6. the MCP tools' messages ----------------------------------------------------------------

KEY = "k" * 24


def keyed_host(tmp_path: Path, url: str, api_key: str | None) -> Host:
    pack = {"url": url, **({"api_key": api_key} if api_key else {})}
    settings = Settings(data_dir=tmp_path / "data", packs=["stitch"], pack_settings={"stitch": pack})
    return Host(settings, [ep for ep in discover_packs() if ep.name == "stitch"])


@pytest.mark.slow
async def test_the_tools_say_a_key_was_refused_and_name_a_node_id_with_a_slash(
    database_url: str, tmp_path: Path
) -> None:
    server = StitchServer(database_url, tmp_path, api_key=KEY).start()
    try:
        async with Client(keyed_host(tmp_path, server.base, "w" * 24).server) as client:
            message = await error(client, "stitch_list_flows")
        assert "refused the API key in AGENTLOOM_STITCH__API_KEY" in message and "STITCH_API_KEY" in message
        async with Client(keyed_host(tmp_path, server.base, None).server) as client:
            message = await error(client, "stitch_list_flows")
        assert "wants an API key: set AGENTLOOM_STITCH__API_KEY" in message
        async with Client(keyed_host(tmp_path, server.base, KEY).server) as client:
            run_id = "00000000-0000-4000-8000-000000000000"
            for tool in ("stitch_complete", "stitch_retry"):
                message = await error(client, tool, run_id=run_id, node_id="a/b")
                assert message.startswith("node_id: 'a/b' contains '/'"), message
    finally:
        server.stop()


def test_a_request_on_a_connection_idle_as_long_as_clients_keep_theirs_is_answered(stitch: StitchServer) -> None:
    """httpx keeps an idle connection 5 s; a server closing it at 5 s too races the next request
    on it, which then fails unanswered (seen as run starts lost under load)."""
    conn = http.client.HTTPConnection("127.0.0.1", stitch.port, timeout=10)
    try:
        conn.request("GET", "/api/stitch/health")
        reply = conn.getresponse()
        assert reply.status == 200 and b"status" in reply.read()
        # Idle past httpx's 5 s: the event would be the server closing the socket (readable, at EOF).
        assert conn.sock is not None
        closed, _, _ = select.select([conn.sock], [], [], 5.5)
        assert closed == [], "the server closed a connection idle for less than 5.5 s"
        conn.request("GET", "/api/stitch/health")  # on the same socket: http.client never reconnects
        reply = conn.getresponse()
        assert reply.status == 200 and b"status" in reply.read(), "no answer after 5.5 s idle"
    finally:
        conn.close()
