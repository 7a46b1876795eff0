"""Helpers for the hostile-input tests (``test_hostile_*.py``): a loopback listener that counts
who reaches it and never answers, requests sent while ``/health`` is asked from another client,
and the checks every such test ends with."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.stitch.conftest import StitchServer


class Listener:
    """A TCP listener on loopback that accepts connections, counts them and never answers:
    the worst target a fetch could have."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    try:
        yield listener
    finally:
        listener.close()


@dataclass
class Meanwhile:
    """The reply to a request, how long it took, and each ``/health`` answered while it was out
    (status, seconds): the tests read the statuses, the benchmark the times."""

    reply: httpx.Response
    seconds: float
    health: list[tuple[int, float]] = field(default_factory=list)

    @property
    def statuses(self) -> list[int]:
        return [status for status, _ in self.health]


def while_health_is_asked(stitch: StitchServer, send: Callable[[httpx.Client], httpx.Response]) -> Meanwhile:
    """Send one request on a thread of its own and, until it is answered, ask ``/health`` from
    another client. A request that hangs fails at its generous deadline, never by speed."""
    done = threading.Event()
    replies: list[httpx.Response] = []

    def hostile() -> None:
        with httpx.Client(base_url=stitch.base + "/api/stitch", timeout=60) as client:
            try:
                replies.append(send(client))
            finally:
                done.set()

    began = time.perf_counter()
    thread = threading.Thread(target=hostile)
    thread.start()
    health: list[tuple[int, float]] = []
    with httpx.Client(timeout=10) as other:
        while not done.is_set():
            asked = time.perf_counter()
            status = other.get(stitch.base + "/api/stitch/health").status_code
            if not done.is_set():
                health.append((status, time.perf_counter() - asked))
    thread.join()
    assert replies, "the hostile request raised (see above)"
    return Meanwhile(replies[0], time.perf_counter() - began, health)


def gate_graph(schema: Any) -> dict[str, Any]:
    """A flow of one UX gate with ``schema`` as its input schema: a run waits there at once."""
    return {"nodes": [{"id": "gate", "type": "UX", "position": {"x": 0, "y": 0}, "data": {"inputSchema": schema}}]}


def flow_input_graph(schema: Any) -> dict[str, Any]:
    return {**gate_graph({"type": "object"}), "inputSchema": schema}


def waiting_gate(stitch: StitchServer, schema: Any) -> str:
    """A run waiting at a gate with ``schema``; its id."""
    made = stitch.http.post("/flows", json={"name": "hostile", "graph": gate_graph(schema)})
    assert made.status_code == 201, made.text
    run = stitch.http.post(f"/flows/{made.json()['id']}/runs", json={"input": {}})
    assert run.status_code == 201, run.text
    assert run.json()["node_states"]["gate"]["status"] == "waiting_for_user"
    return str(run.json()["id"])


def messages(reply: httpx.Response) -> str:
    detail = reply.json()["detail"]
    return " | ".join(item["msg"] for item in detail) if isinstance(detail, list) else str(detail)


def assert_clean_log(stitch: StitchServer) -> None:
    """No traceback and no 500 in the server's log."""
    text = stitch.log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]
    assert " 500 " not in text, text[-4000:]
