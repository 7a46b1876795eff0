"""The callback gate on its own, event by event: callbacks wait their turn in arrival order, a
read in progress holds back new callbacks beyond one, and an open stream holds back nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from agentloom.stitch.middleware import CALLBACK_PREFIX, CallbackAdmission


class App:
    """Each request blocks until the test releases it; ``started`` lists the paths in the order
    the gate let them in. A read sends its response start when released; a stream sends it at
    once and its body when released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release: dict[str, asyncio.Event] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        self.started.append(path)
        gate = self.release.setdefault(path, asyncio.Event())
        if path.endswith("/stream"):
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await gate.wait()
        else:
            await gate.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def scope(method: str, path: str) -> Scope:
    return {"type": "http", "method": method, "path": path, "headers": []}


async def nothing() -> Message:
    return {"type": "http.disconnect"}


class Client:
    def __init__(self, concurrency: int = 2, queue: int = 10) -> None:
        self.app = App()
        self.gate = CallbackAdmission(self.app, concurrency=concurrency, queue=queue, retry_after=1)
        self.statuses: dict[str, int] = {}
        self.tasks: list[asyncio.Task[Any]] = []

    def request(self, method: str, path: str) -> None:
        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.statuses[path] = message["status"]

        self.tasks.append(asyncio.create_task(self.gate(scope(method, path), nothing, send)))

    def callback(self, name: str) -> None:
        self.request("POST", f"{CALLBACK_PREFIX}{name}")

    async def finish(self, path: str) -> None:
        self.app.release.setdefault(path, asyncio.Event()).set()
        await settle()

    def started(self) -> list[str]:
        return [p.removeprefix(CALLBACK_PREFIX) for p in self.app.started]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_callbacks_beyond_the_concurrency_wait_in_arrival_order() -> None:
    client = Client(concurrency=2)
    for name in "abcd":
        client.callback(name)
    await settle()
    assert client.started() == ["a", "b"]
    assert client.gate.active == 2
    await client.finish(f"{CALLBACK_PREFIX}b")
    assert client.started() == ["a", "b", "c"]
    await client.finish(f"{CALLBACK_PREFIX}a")
    assert client.started() == ["a", "b", "c", "d"]


async def test_a_read_in_progress_holds_back_callbacks_beyond_one() -> None:
    client = Client(concurrency=4)
    client.request("GET", "/api/stitch/runs")
    await settle()
    for name in "abc":
        client.callback(name)
    await settle()
    assert client.started() == ["/api/stitch/runs", "a"]  # one callback still runs
    await client.finish(f"{CALLBACK_PREFIX}a")
    assert client.started() == ["/api/stitch/runs", "a", "b"]
    await client.finish("/api/stitch/runs")  # the read answered: the rest go at full width
    assert client.started() == ["/api/stitch/runs", "a", "b", "c"]
    assert client.gate.reads == 0
    assert client.gate.active == 2


async def test_callbacks_in_hand_when_a_read_arrives_carry_on() -> None:
    client = Client(concurrency=3)
    for name in "abcd":
        client.callback(name)
    await settle()
    client.request("GET", "/api/stitch/health")
    await settle()
    await client.finish(f"{CALLBACK_PREFIX}a")
    assert client.started()[-1] == "/api/stitch/health"  # d waits: two are still in hand
    assert client.gate.active == 2
    await client.finish("/api/stitch/health")
    assert client.started()[-1] == "d"


async def test_an_open_stream_holds_nothing_back() -> None:
    client = Client(concurrency=2)
    client.request("GET", "/api/stitch/runs/stream")
    await settle()
    assert client.gate.reads == 0  # its response started: it no longer counts
    for name in "ab":
        client.callback(name)
    await settle()
    assert client.started() == ["/api/stitch/runs/stream", "a", "b"]
    await client.finish("/api/stitch/runs/stream")


async def test_a_full_queue_is_refused_with_retry_after() -> None:
    client = Client(concurrency=1, queue=1)
    for name in "abc":
        client.callback(name)
    await settle()
    assert client.started() == ["a"]
    assert client.statuses == {f"{CALLBACK_PREFIX}c": 503}
    await client.finish(f"{CALLBACK_PREFIX}a")
    assert client.started() == ["a", "b"]


async def test_a_callback_gone_while_waiting_gives_its_place_on() -> None:
    client = Client(concurrency=1)
    for name in "abc":
        client.callback(name)
    await settle()
    client.tasks[1].cancel()  # b's client went away while waiting
    await settle()
    await client.finish(f"{CALLBACK_PREFIX}a")
    assert client.started() == ["a", "c"]
    assert client.gate.active == 1


async def test_a_callback_gone_just_as_its_turn_was_skipped_leaves_the_gate_whole() -> None:
    client = Client(concurrency=1)
    for name in "abc":
        client.callback(name)
    await settle()
    client.app.release.setdefault(f"{CALLBACK_PREFIX}a", asyncio.Event()).set()  # a ends first ...
    client.tasks[1].cancel()  # ... then b's client goes: a hands on past b's cancelled turn
    await settle()
    assert client.started() == ["a", "c"]
    assert client.gate.active == 1
    with pytest.raises(asyncio.CancelledError):  # b ends as cancelled, not with an error of the gate's
        await client.tasks[1]


@pytest.fixture(autouse=True)
async def no_leftover_tasks() -> Any:
    yield
    for task in asyncio.all_tasks() - {asyncio.current_task()}:
        task.cancel()
