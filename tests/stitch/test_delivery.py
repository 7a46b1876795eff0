"""Webhook delivery: re-sent with backoff while it never reached a worker (connection reset or
refused), failed at once when the worker answered. A real server process, a real worker, and a
real socket in front of it that resets its first connections; SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import pytest

from agentloom.stitch.db import Database
from agentloom.stitch.dispatcher import Dispatcher
from agentloom.stitch.engine import Engine, Sending
from agentloom.stitch.flows import Flows
from agentloom.stitch.models import Graph
from tests.conftest import free_port
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.test_api import create, start, wait_until
from tests.stitch.worker import Worker

TRIES = 4  # the first send and the dispatcher's three re-sends (0.2, 0.4, 0.8 s, jittered by up to 25 %)


class Resetter:
    """A TCP port that resets (RST, SO_LINGER 0) its first ``resets`` connections and relays
    the others to ``target_port``: a worker whose listen backlog overflowed, then recovered."""

    def __init__(self, target_port: int, resets: int) -> None:
        self.target_port, self.resets = target_port, resets
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> Resetter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            if self.accepted <= self.resets:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def one_worker(url: str, **data: object) -> dict:  # type: ignore[type-arg]
    b = Builder(url)
    b.node("Worker", "w", **data)
    return b.graph()


@pytest.mark.slow
def test_a_webhook_reset_twice_is_delivered_on_the_third_try(stitch: StitchServer, worker: Worker) -> None:
    with Resetter(worker.port, resets=2) as gate:
        run = stitch.wait_for(start(stitch, create(stitch, one_worker(f"http://127.0.0.1:{gate.port}/work")), 7))
        assert run["status"] == "completed", run["node_states"]
        assert run["node_states"]["w"]["output"] == 7
        assert gate.accepted == 3  # two resets, then the delivery
    assert worker.keys() == ["w"]  # the resets never reached the worker; the delivery did, once
    # The run is complete once the callback is committed; the worker notes the answer just after.
    assert wait_until(lambda: worker.answers) == [("w", 1, 200)]  # the same attempt's token, accepted


@pytest.mark.slow
def test_a_webhook_reset_every_time_fails_the_node_after_the_tries(stitch: StitchServer, worker: Worker) -> None:
    with Resetter(worker.port, resets=100) as gate:
        url = f"http://127.0.0.1:{gate.port}/work"
        run = stitch.wait_for(start(stitch, create(stitch, one_worker(url))))
        assert run["status"] == "failed"
        error = run["node_states"]["w"]["error"]
        assert f"gave up after {TRIES} tries" in error and "is unreachable" in error and url in error
        # The failure is written after the last try, with the webhook's row: no longer pending,
        # so no reconciler sends it again.
        assert stitch.http.get("/health").json()["pending_dispatches"] == 0
        assert gate.accepted == TRIES  # nothing more after the node failed
    assert worker.keys() == []


@pytest.mark.slow
def test_a_worker_that_never_listens_fails_the_node_after_the_tries(stitch: StitchServer) -> None:
    url = f"http://127.0.0.1:{free_port()}/gone"
    run_id = start(stitch, create(stitch, one_worker(url)))
    run = stitch.wait_for(run_id)
    assert run["status"] == "failed"
    error = run["node_states"]["w"]["error"]
    assert f"gave up after {TRIES} tries" in error and "is unreachable" in error and url in error
    # It waited out the backoff before giving up, by the server's own clock: from the run's start to
    # the node's failure (a loaded machine only lengthens this).
    (failure,) = [e for e in stitch.http.get(f"/runs/{run_id}/events").json() if e["status"] == "failed"]
    began, failed = (datetime.fromisoformat(at.replace("Z", "+00:00")) for at in (run["created_at"], failure["at"]))
    assert failed >= began + timedelta(seconds=0.75 * (0.2 + 0.4 + 0.8))


@pytest.mark.slow
@pytest.mark.parametrize("mode,reason", [("reject", "answered HTTP 500"), ("hop", "redirects are not followed")])
def test_a_worker_that_answers_an_error_fails_the_node_at_once(
    stitch: StitchServer, worker: Worker, mode: str, reason: str
) -> None:
    url = f"{worker.base}/hop" if mode == "hop" else worker.url
    run = stitch.wait_for(start(stitch, create(stitch, one_worker(url, mode=mode))))
    assert run["status"] == "failed"
    error = run["node_states"]["w"]["error"]
    assert reason in error and "tries" not in error
    # The node failed with its webhook's row, which is no longer pending: nothing sends it again.
    assert stitch.http.get("/health").json()["pending_dispatches"] == 0
    assert worker.keys() == ([] if mode == "hop" else ["w"])  # /hop records nothing; /work exactly once


@pytest.mark.slow
def test_an_unanswered_webhook_is_sent_again_with_the_same_token(
    database_url: str, tmp_path: Path, worker: Worker
) -> None:
    server = StitchServer(database_url, tmp_path, worker_timeout=0.5).start()
    try:
        run = server.wait_for(start(server, create(server, one_worker(worker.url, mode="slow", delay=2))), timeout=30)
        assert run["status"] == "failed"
        error = run["node_states"]["w"]["error"]
        assert "did not answer within 0.5 s" in error and f"gave up after {TRIES} tries" in error
        sent = [p for p in worker.received if p["nodeId"] == "w"]
        assert len(sent) == TRIES and len({p["callbackUrl"] for p in sent}) == 1  # one attempt, one token
    finally:
        server.stop()


class HeldWorker:
    """A bare HTTP/1.1 server in the test's event loop that holds every request ``hold``
    seconds before answering 200, counting how many it holds at once."""

    def __init__(self, hold: float, expected: int) -> None:
        self.hold, self.now, self.most, self.served = hold, 0, 0, 0
        self.expected = expected
        self.all_served = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(self.hold)
        self.now -= 1
        self.served += 1
        if self.served == self.expected:
            self.all_served.set()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    def serve(
        self,
        db: Database,
        dispatcher: Callable[[], Dispatcher],
        sendings: Callable[[str], list[Sending]],
        within: float,
    ) -> None:
        """Run a dispatcher against this worker until it has served what it expects, then dispose of ``db``.
        ``sendings(url)`` makes what the dispatcher is given (in a thread: it may write to the database)."""

        async def main() -> None:
            server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/work"
            running = dispatcher()
            async with anyio.create_task_group() as tg:
                await tg.start(running.run)
                running.submit(await anyio.to_thread.run_sync(sendings, url))
                with anyio.fail_after(within):
                    await self.all_served.wait()
                tg.cancel_scope.cancel()
            server.close()

        try:
            anyio.run(main)
        finally:
            db.dispose()


@pytest.mark.parametrize("sends_per_host", [1, 3])
def test_concurrent_sends_to_one_worker_are_bounded(tmp_path: Path, sends_per_host: int) -> None:
    db = Database(f"sqlite:///{tmp_path / 'stitch.db'}")
    engine = Engine(db, "http://127.0.0.1:1")
    held = HeldWorker(hold=0.1, expected=8)
    # Outbox ids that do not exist: marking them sent changes nothing, sending is real.
    held.serve(
        db,
        lambda: Dispatcher(engine, sends_per_host=sends_per_host, timeout=5),
        lambda url: [Sending(i, str(uuid.uuid4()), f"w{i}", 1, url, {"n": i}) for i in range(8)],
        within=10,
    )
    assert held.served == 8 and held.most == sends_per_host


@pytest.mark.slow
def test_a_webhook_still_being_sent_keeps_its_lease(database_url: str) -> None:
    """A worker that holds the webhook for several leases: the sender renews the lease, so the
    reconciler (every 0.05 s) never sends it a second time while the first is still under way."""
    db = Database(database_url)
    engine = Engine(db, "http://127.0.0.1:1", lease_seconds=0.6)
    held = HeldWorker(hold=2.0, expected=1)

    def sendings(url: str) -> list[Sending]:
        flow = Flows(db).create("held", Graph.model_validate(one_worker(url)))
        return engine.start_run(flow["id"], 1)[1]

    held.serve(db, lambda: Dispatcher(engine, timeout=10, poll_interval=0.05), sendings, within=20)
    # A re-send after the first lease ran out would have reached the worker while it held the first.
    assert held.served == 1 and held.most == 1


def test_the_pool_bound_must_be_positive(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'stitch.db'}")
    try:
        with pytest.raises(ValueError, match="sends_per_host is 0; it must be at least 1"):
            Dispatcher(Engine(db, "http://127.0.0.1:1"), sends_per_host=0)
    finally:
        db.dispose()
