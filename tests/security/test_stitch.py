"""Stitch's security regressions: a real server process (SQLite and PostgreSQL where the
database matters), a real worker, and the stitch MCP pack.

- ids in the MCP tools cannot reach another endpoint; node ids are a URL-safe alphabet and
  every accepted one round-trips through a real callback;
- values that cannot be stored or returned are refused at the edge with their JSON path;
  one failing request does not open the pack's breaker, an outage does;
- request bodies are limited before they are parsed;
- webhook targets: no credentials, no link-local or metadata addresses (by literal at save,
  by name when sending), no redirects, a short clean excerpt of an error answer;
- the API key: none blank or short, and /docs and /openapi.json need it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Self

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp.client import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from tests.conftest import PYTHON, free_port
from tests.stitch.conftest import (  # noqa: F401 - fixtures: a database per test, a server on it, a worker
    StitchServer,
    database_url,
    drop_pg_database,
    fresh_pg_database,
    postgres,
    stitch,
    worker,
)
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

JSON = {"content-type": "application/json"}


def stitch_host(tmp_path: Path, url: str) -> Host:
    settings = Settings(data_dir=tmp_path / "data", packs=["stitch"], pack_settings={"stitch": {"url": url}})
    return Host(settings, [ep for ep in discover_packs() if ep.name == "stitch"])


def create(server: StitchServer, graph: dict[str, Any]) -> str:
    response = server.http.post("/flows", json={"name": "f", "graph": graph})
    assert response.status_code == 201, response.text
    return response.json()["id"]  # type: ignore[no-any-return]


def start(server: StitchServer, flow_id: str, run_input: Any = None) -> str:
    response = server.http.post(f"/flows/{flow_id}/runs", json={"input": run_input})
    assert response.status_code == 201, response.text
    return response.json()["id"]  # type: ignore[no-any-return]


def until(predicate: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return value


def states(server: StitchServer, run_id: str) -> dict[str, Any]:
    response = server.http.get(f"/runs/{run_id}")
    assert response.status_code == 200, response.text
    return response.json()["node_states"]  # type: ignore[no-any-return]


def text_of(result: Any) -> str:
    return result.content[0].text  # type: ignore[no-any-return]


# -- ids in the MCP tools ------------------------------------------------------------------


@pytest.mark.slow
async def test_tool_arguments_cannot_reach_another_endpoint(
    stitch: StitchServer, worker: Worker, tmp_path: Path
) -> None:
    b = Builder(worker.url)
    b.node("Worker", "w", mode="fail")
    b.node("UX", "gate.v1:review")  # '.' and ':' are node id characters; the tool must send them intact
    flow_id = create(stitch, b.graph())
    run_id = start(stitch, flow_id, {"n": 1})
    until(lambda: states(stitch, run_id)["w"]["status"] == "failed")
    before = stitch.http.get(f"/runs/{run_id}/events").json()
    async with Client(stitch_host(tmp_path, stitch.base).server) as client:
        attacks = [
            (
                "stitch_complete",
                {"run_id": f"../retry/{run_id}", "node_id": "w", "output": {}},
                "run_id",
            ),  # would retry w
            ("stitch_retry", {"run_id": f"{run_id}/../../retry/{run_id}", "node_id": "w"}, "run_id"),
            (
                "stitch_start_run",
                {"flow_id": f"../complete/{run_id}/gate.v1:review?", "input": {"x": 1}},
                "flow_id",
            ),  # would complete the gate
            ("stitch_run_status", {"run_id": f"{run_id}?x=1"}, "run_id"),
            ("stitch_complete", {"run_id": run_id, "node_id": "..", "output": {}}, "node_id"),
            ("stitch_retry", {"run_id": run_id, "node_id": "."}, "node_id"),
            ("stitch_retry", {"run_id": run_id, "node_id": "w\n"}, "node_id"),
            # Node ids are sent percent-encoded, as one segment: the server knows no such node.
            (
                "stitch_complete",
                {"run_id": run_id, "node_id": "gate.v1:review?x=1", "output": {}},
                "Stitch refused",
            ),  # would complete the gate
            ("stitch_complete", {"run_id": run_id, "node_id": "gate.v1:review#x", "output": {}}, "Stitch refused"),
            # A '/' is refused before any request, naming the field (no node id can hold one).
            ("stitch_complete", {"run_id": run_id, "node_id": "../retry/w", "output": {}}, "node_id: '../retry/w'"),
            ("stitch_retry", {"run_id": run_id, "node_id": "w/../w"}, "node_id: 'w/../w'"),
            ("stitch_retry", {"run_id": run_id, "node_id": "w%2F..%2F..%2Fretry"}, "Stitch refused"),
        ]
        for tool, arguments, named in attacks:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments, result.structured_content)
            assert text_of(result).startswith(f"{named}: " if named.endswith("_id") else named), (
                arguments,
                text_of(result),
            )
        now = states(stitch, run_id)
        assert now["gate.v1:review"]["status"] == "waiting_for_user"
        assert (now["w"]["status"], now["w"]["attempt"]) == ("failed", 1)
        assert stitch.http.get(f"/runs/{run_id}/events").json() == before
        assert len(stitch.http.get("/runs").json()["runs"]) == 1
        # The real thing still works: an upper-case UUID, a node id with '.' and ':'.
        done = await client.call_tool(
            "stitch_complete", {"run_id": run_id.upper(), "node_id": "gate.v1:review", "output": {"ok": 1}}
        )
        assert not done.is_error, text_of(done)
        assert states(stitch, run_id)["gate.v1:review"]["output"] == {"ok": 1}


# -- node ids ------------------------------------------------------------------------------

ALPHABET = "abcXYZ019_-.:"


@pytest.mark.slow
def test_node_ids_outside_the_alphabet_are_refused_when_saved(stitch: StitchServer) -> None:
    for node_id in ["a/b", "a?b", "a#b", "a b", "a%2Fb", "caf\u00e9", "a\\b", "a;b", "a\u0001", ".", "..", "..."]:
        b = Builder()
        b.chain(b.node("Worker", node_id), b.node("UX", "after"))
        response = stitch.http.post("/flows", json={"name": "f", "graph": b.graph()})
        assert response.status_code == 422, (node_id, response.text)
        rule = "dots alone" if set(node_id) == {"."} else "may contain only letters, digits, '_', '-', '.' and ':'"
        assert f"node id {node_id!a}" in response.json()["detail"][0]["msg"] and rule in response.text, response.text
    assert stitch.http.get("/flows").json() == []


@pytest.mark.slow
def test_every_accepted_node_id_round_trips_through_a_real_callback(stitch: StitchServer, worker: Worker) -> None:
    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(ids=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=30), min_size=1, max_size=3, unique=True))
    @example(ids=["."])
    @example(ids=[".."])
    @example(ids=["...", "a.b:c-d_e", "-", ":"])
    def round_trip(ids: list[str]) -> None:
        b = Builder(worker.url)
        b.chain(*(b.node("Worker", i) for i in ids))
        response = stitch.http.post("/flows", json={"name": "ids", "graph": b.graph()})
        if response.status_code == 422:  # the one rule beyond the alphabet: not dots alone
            assert any(set(i) == {"."} for i in ids), response.text
            assert "dots alone" in response.text
            return
        assert response.status_code == 201, response.text
        run = stitch.wait_for(start(stitch, response.json()["id"], {"ids": ids}), timeout=15)
        assert run["status"] == "completed", run["node_states"]
        assert {k: s["output"] for k, s in run["node_states"].items()} == {i: {"ids": ids} for i in ids}

    round_trip()


# -- values that cannot be stored or returned ----------------------------------------------------


def _deep(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


BAD_VALUES = {
    "lone surrogate": ('"\\ud800"', "lone surrogate"),
    "NUL": ('"a\\u0000b"', "NUL"),
    "NaN": ("NaN", "NaN"),
    "Infinity": ("Infinity", "NaN and Infinity"),
    "-Infinity": ("-Infinity", "NaN and Infinity"),
    "1e999": ("1e999", "NaN and Infinity"),
    "nested 500 deep": (_deep(500), "nested more than"),
    "nested 65 deep": (_deep(65), "nested more than"),
    "NUL in a key": ('{"a\\u0000": 1}', "NUL"),
}
STRINGS = ("lone surrogate", "NUL")


def _refused(response: httpx.Response, path: str, what: str) -> None:
    assert response.status_code == 422, (response.status_code, response.text)
    detail = response.json()["detail"]
    assert isinstance(detail, list) and len(detail) == 1, detail
    assert detail[0]["msg"].startswith(path), (path, detail)
    assert what in detail[0]["msg"], (what, detail)


@pytest.mark.slow
def test_values_that_cannot_be_stored_are_refused_with_their_json_path(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.node("Worker", "w", mode="never")
    b.node("UX", "gate")
    flow_id = create(stitch, b.graph())
    run_id = start(stitch, flow_id, 1)
    callback = until(lambda: worker.received)[0]["callbackUrl"]
    for name, (value, what) in BAD_VALUES.items():
        post = stitch.http.post

        def body(template: str) -> str:
            return template.replace("VALUE", value)  # noqa: B023 - used at once, in this iteration

        graph = body('{"name": "f", "graph": {"nodes": [{"id": "u", "type": "UX", "data": {"x": VALUE}}]}}')
        _refused(post("/flows", content=graph, headers=JSON), "$.graph.nodes[0].data.x", what)
        _refused(stitch.http.put(f"/flows/{flow_id}", content=graph, headers=JSON), "$.graph.nodes[0].data.x", what)
        _refused(
            post(f"/flows/{flow_id}/runs", content=body('{"input": {"k": VALUE}}'), headers=JSON), "$.input.k", what
        )
        _refused(
            httpx.post(callback, content=body('{"status": "completed", "output": {"k": VALUE}}'), headers=JSON),
            "$.output.k",
            what,
        )
        _refused(post(f"/complete/{run_id}/gate", content=body('{"k": VALUE}'), headers=JSON), "$.k", what)
        if name in STRINGS:
            _refused(
                httpx.post(callback, content=body('{"status": "failed", "error": VALUE}'), headers=JSON),
                "$.error",
                what,
            )
            _refused(
                post(
                    "/flows",
                    content=body('{"name": VALUE, "graph": {"nodes": [{"id": "u", "type": "UX"}]}}'),
                    headers=JSON,
                ),
                "$.name",
                what,
            )
        # Nothing was written, and everything still reads.
        assert [f["version"] for f in stitch.http.get("/flows").json()] == [1], name
        assert [r["id"] for r in stitch.http.get("/runs").json()["runs"]] == [run_id], name
        now = states(stitch, run_id)
        assert (now["w"]["status"], now["gate"]["status"]) == ("running", "waiting_for_user"), name
    # 64 levels is the limit, and a worker refused once can still complete its node.
    fine = json.loads(_deep(62))
    assert httpx.post(callback, json={"status": "completed", "output": {"k": fine}}).status_code == 200
    assert stitch.http.post(f"/complete/{run_id}/gate", json={"ok": True}).status_code == 200
    run = stitch.wait_for(run_id)
    assert run["status"] == "completed" and run["node_states"]["w"]["output"] == {"k": fine}
    # A completion that is not JSON at all is refused too, not stored as bytes.
    run_id = start(stitch, flow_id, 1)
    until(lambda: states(stitch, run_id)["gate"]["status"] == "waiting_for_user")
    plain = stitch.http.post(f"/complete/{run_id}/gate", content=b"hello", headers={"content-type": "text/plain"})
    assert plain.status_code == 415 and states(stitch, run_id)["gate"]["status"] == "waiting_for_user"


@pytest.mark.slow
def test_ids_that_are_not_uuids_are_unknown_alike_on_both_databases(stitch: StitchServer) -> None:
    base = f"{stitch.base}/api/stitch"
    for bad in ["%00", "%ED%A0%80", "nope", "00000000-0000-0000-0000-00000000000%00"]:
        for method, path in [
            ("GET", f"/runs/{bad}"),
            ("GET", f"/flows/{bad}"),
            ("POST", f"/flows/{bad}/runs"),
            ("PUT", f"/flows/{bad}"),
            ("POST", f"/complete/{bad}/x"),
            ("POST", f"/retry/{bad}/x"),
        ]:
            response = httpx.request(method, base + path, json={"name": "n"} if method == "PUT" else {})
            assert response.status_code == 404, (method, path, response.status_code, response.text)
        assert httpx.get(f"{base}/runs/{bad}/events").status_code == 404
        listed = httpx.get(f"{base}/runs?flow_id={bad}")
        assert listed.status_code == 422 and "flow_id" in listed.text


class FakeStitch:
    """An HTTP server answering like a Stitch server that fails: 500 for one run, or 503 for everything."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.outage = False
        routes = [Route("/api/stitch/runs/{run_id}", self._run), Route("/api/stitch/flows", self._flows)]
        self._server = uvicorn.Server(
            uvicorn.Config(
                Starlette(routes=routes), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        until(lambda: self._server.started)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    async def _run(self, request: Request) -> JSONResponse:
        if self.outage:
            return JSONResponse({"detail": "the Stitch database is unavailable"}, status_code=503)
        return JSONResponse({"detail": "internal error on this run"}, status_code=500)

    async def _flows(self, request: Request) -> JSONResponse:
        if self.outage:
            return JSONResponse({"detail": "the Stitch database is unavailable"}, status_code=503)
        return JSONResponse([])


async def test_a_500_for_one_request_does_not_open_the_breaker_for_every_tool(tmp_path: Path) -> None:
    run_id = str(uuid.uuid4())
    with FakeStitch() as fake:
        async with Client(stitch_host(tmp_path, fake.url).server) as client:
            for _ in range(5):
                result = await client.call_tool("stitch_run_status", {"run_id": run_id})
                assert (
                    result.is_error
                    and "HTTP 500" in text_of(result)
                    and "internal error on this run" in text_of(result)
                )
                assert "circuit" not in text_of(result)
            listed = await client.call_tool("stitch_list_flows", {})
            assert not listed.is_error, text_of(listed)
            fake.outage = True  # 503: the server cannot serve anything; that counts
            for _ in range(3):
                result = await client.call_tool("stitch_list_flows", {})
                assert result.is_error and "HTTP 503" in text_of(result)
            result = await client.call_tool("stitch_run_status", {"run_id": run_id})
            assert result.is_error and "circuit open" in text_of(result)


@pytest.mark.slow
def test_a_lost_database_answers_503_and_opens_the_breaker(postgres: str, tmp_path: Path) -> None:
    url = fresh_pg_database(postgres)
    server = StitchServer(url, tmp_path).start()
    try:  # dropping the database under the running server: its connections are cut, new ones fail
        assert server.http.get("/flows").status_code == 200
        drop_pg_database(postgres, url)
        response = server.http.get("/flows")
        assert response.status_code == 503 and "database is unavailable" in response.text

        async def tools() -> None:
            async with Client(stitch_host(tmp_path, server.base).server) as client:
                for _ in range(3):
                    assert "HTTP 503" in text_of(await client.call_tool("stitch_list_flows", {}))
                assert "circuit open" in text_of(await client.call_tool("stitch_list_flows", {}))

        asyncio.run(tools())
    finally:
        server.stop()
        drop_pg_database(postgres, url)


# -- request limits ----------------------------------------------------------------------------


@pytest.mark.slow
def test_bodies_above_the_limit_are_refused_before_they_are_parsed(
    database_url: str, tmp_path: Path, worker: Worker
) -> None:
    server = StitchServer(database_url, tmp_path)
    server.env["STITCH_MAX_BODY_BYTES"] = "4096"
    server.start()
    try:
        b = Builder(worker.url)
        b.chain(b.node("Worker", "w", mode="never"), b.node("UX", "gate"))
        flow_id = create(server, b.graph())
        run_id = start(server, flow_id, 1)
        callback = until(lambda: worker.received)[0]["callbackUrl"]
        big = "x" * 5000
        too_large = [
            server.http.post(
                "/flows", json={"name": "f", "graph": {"nodes": [{"id": "u", "type": "UX", "data": {"big": big}}]}}
            ),
            server.http.post("/flows", content=b"{" * 5000, headers=JSON),  # not even JSON: refused before parsing
            server.http.post(
                "/flows", content=iter([b"{" * 3000, b"{" * 3000]), headers=JSON
            ),  # chunked: no Content-Length
            server.http.put(
                f"/flows/{flow_id}",
                json={"name": "renamed", "graph": {"nodes": [{"id": "u", "type": "UX", "data": {"big": big}}]}},
            ),
            server.http.post(f"/flows/{flow_id}/runs", json={"input": big}),
            httpx.post(callback, json={"status": "completed", "output": big}),
            httpx.post(callback, content=iter([b" " * 3000, b" " * 3000]), headers=JSON),
        ]
        for response in too_large:
            assert response.status_code == 413, (response.request.url, response.status_code, response.text[:200])
            assert "STITCH_MAX_BODY_BYTES" in response.text
        assert [f["version"] for f in server.http.get("/flows").json()] == [1]
        assert [r["id"] for r in server.http.get("/runs").json()["runs"]] == [run_id]
        assert states(server, run_id)["w"]["status"] == "running"
        assert httpx.post(callback, json={"status": "completed", "output": "x" * 3000}).status_code == 200
        assert server.wait_for(run_id, ("waiting_for_user",))["node_states"]["w"]["output"] == "x" * 3000
        assert server.http.post(f"/complete/{run_id}/gate", json={"big": big}).status_code == 413
        assert server.http.post(f"/complete/{run_id}/gate", json={"ok": True}).status_code == 200
    finally:
        server.stop()


# -- webhook targets ---------------------------------------------------------------------------------

REFUSED_TARGETS = {
    "http://user:secret@127.0.0.1:9/work": "credentials",
    "http://:secret@127.0.0.1:9/work": "credentials",
    "http://169.254.169.254/latest/meta-data/": "cloud metadata",
    "http://[fd00:ec2::254]/latest/meta-data/": "cloud metadata",
    "http://[::ffff:169.254.169.254]/": "cloud metadata",
    "http://100.100.100.200/latest/meta-data/": "cloud metadata",
    "http://169.254.1.1:8080/work": "link-local",
    "http://[fe80::1]:8080/work": "link-local",
    "http://2852039166/": "legacy numeric",
}


@pytest.mark.slow
def test_webhook_urls_with_credentials_or_metadata_addresses_are_refused_when_saved(stitch: StitchServer) -> None:
    for url, why in REFUSED_TARGETS.items():
        b = Builder(url)
        b.node("Worker", "w")
        response = stitch.http.post("/flows", json={"name": "f", "graph": b.graph()})
        assert response.status_code == 422 and why in response.text, (url, response.text)
        assert "secret" not in response.text
    assert stitch.http.get("/flows").json() == []
    # Loopback and private networks stay allowed by default: workers often run there.
    for allowed in (
        "http://127.0.0.1:9/work",
        "http://[::1]:9/work",
        "http://10.1.2.3/work",
        "http://192.168.1.20:8080/w",
        "http://localhost:9/work",
        "https://example.com/hook?token=t",
    ):
        b = Builder(allowed)
        b.node("Worker", "w")
        create(stitch, b.graph())


@pytest.mark.slow
def test_deny_private_refuses_loopback_by_address_and_by_name_and_the_allow_list_permits(
    database_url: str,
    tmp_path: Path,
    worker: Worker,
) -> None:
    server = StitchServer(database_url, tmp_path)
    server.env.update(STITCH_WEBHOOK_DENY_PRIVATE="true", STITCH_WEBHOOK_ALLOW="169.254.169.254, 192.168.7.0/24")
    server.start()
    try:

        def save(url: str) -> httpx.Response:
            return server.http.post(
                "/flows",
                json={"name": "f", "graph": {"nodes": [{"id": "w", "type": "Worker", "data": {"webhookUrl": url}}]}},
            )

        for refused in (worker.url, "http://10.0.0.1/work", "http://[::1]:9/work", "http://169.254.169.1/"):
            response = save(refused)
            assert response.status_code == 422 and "STITCH_WEBHOOK" in response.text, (refused, response.text)
        for allowed in (
            "http://169.254.169.254/latest/meta-data/",
            "http://192.168.7.9/work",
            "http://93.184.215.14/work",
        ):
            assert save(allowed).status_code == 201, allowed
        # A name is checked when the webhook is sent: localhost resolves to loopback, refused.
        by_name = f"http://localhost:{worker.port}/work"
        response = save(by_name)
        assert response.status_code == 201, response.text
        run = server.wait_for(start(server, response.json()["id"], 1))
        error = run["node_states"]["w"]["error"]
        assert run["status"] == "failed" and "refused" in error and "localhost resolves to" in error, error
        assert "not a public address" in error
        until(lambda: server.http.get("/health").json()["pending_dispatches"] == 0)  # nothing left to send
        assert worker.received == []
    finally:
        server.stop()


async def test_names_resolving_to_metadata_addresses_are_refused_when_sent() -> None:
    from agentloom.stitch.webhooks import TargetRefused, WebhookPolicy

    class Fixed:
        def __init__(self, addresses: list[str]) -> None:
            self.addresses = addresses

        async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[dict[str, Any]]:
            return [
                {"hostname": host, "host": a, "port": port, "family": family, "proto": 0, "flags": 0}
                for a in self.addresses
            ]

        async def close(self) -> None:
            pass

    async def resolve(policy: WebhookPolicy, host: str, addresses: list[str]) -> list[dict[str, Any]]:
        resolver = policy.resolver()
        await resolver.close()
        resolver.inner = Fixed(addresses)  # type: ignore[attr-defined]
        return await resolver.resolve(host, 80)  # type: ignore[return-value]

    for addresses in (
        ["169.254.169.254"],
        ["93.184.215.14", "169.254.169.254"],
        ["fd00:ec2::254"],
        ["fe80::1"],
        ["::ffff:169.254.169.254"],
    ):
        with pytest.raises(TargetRefused, match="metadata.example resolves to"):
            await resolve(WebhookPolicy(), "metadata.example", addresses)
    assert await resolve(WebhookPolicy("metadata.example"), "metadata.example", ["169.254.169.254"])
    assert await resolve(WebhookPolicy("169.254.0.0/16"), "metadata.example", ["169.254.169.254"])
    assert await resolve(WebhookPolicy(), "worker.example", ["127.0.0.1", "10.0.0.2"])
    with pytest.raises(TargetRefused, match="not a public address"):
        await resolve(WebhookPolicy(deny_private=True), "worker.example", ["10.0.0.2"])


@pytest.mark.slow
def test_redirects_are_not_followed(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(f"{worker.base}/hop")
    b.node("Worker", "w")
    run = stitch.wait_for(start(stitch, create(stitch, b.graph()), 1))
    error = run["node_states"]["w"]["error"]
    assert run["status"] == "failed" and "answered HTTP 307" in error and "redirects are not followed" in error, error
    until(lambda: stitch.http.get("/health").json()["pending_dispatches"] == 0)  # nothing left to send
    assert worker.received == []  # /work, where the redirect pointed, was never called


@pytest.mark.slow
def test_a_worker_error_answer_is_kept_short_and_clean(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.node("Worker", "w", mode="garbage")
    run = stitch.wait_for(start(stitch, create(stitch, b.graph()), 1))
    error = run["node_states"]["w"]["error"]
    assert run["status"] == "failed" and f"worker at {worker.url} answered HTTP 500: " in error, error
    assert "boom" in error and len(error) <= 300, error
    assert error.isprintable(), error


# -- the API key ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "key,message",
    [
        ("", "is set but blank"),
        ("   ", "is set but blank"),
        ("short-key", "too short (9 characters"),
        ("fifteen-chars!!", "too short (15 characters"),
        (" padded-key-of-20ch ", "printable ASCII"),
    ],
)
def test_a_blank_or_short_api_key_is_refused_at_start(tmp_path: Path, key: str, message: str) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTLOOM_DATA_DIR": str(tmp_path / "data"),
        "STITCH_BASE_URL": "http://127.0.0.1:8000",
        "STITCH_API_KEY": key,
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    try:
        done = subprocess.run(
            [PYTHON, "-m", "agentloom", "stitch", "serve", "--port", str(free_port())],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server started with STITCH_API_KEY={key!r}")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "STITCH_API_KEY" in done.stderr and "secrets.token_urlsafe" in done.stderr, (
        done.stderr
    )


@pytest.mark.slow
def test_docs_and_the_openapi_description_need_the_key_when_one_is_set(tmp_path: Path) -> None:
    key = "k" * 12 + "-docs-key"
    server = StitchServer(f"sqlite:///{tmp_path / 's.db'}", tmp_path, api_key=key).start()
    try:
        for path in ("/docs", "/openapi.json", "/redoc", "/api/stitch/flows", "/api/stitch/nowhere"):
            assert httpx.get(server.base + path).status_code == 401, path
            assert (
                httpx.get(server.base + path, headers={"Authorization": "Bearer wrong-key-of-some-length"}).status_code
                == 401
            ), path
        assert httpx.get(server.base + "/docs", headers={"Authorization": f"Bearer {key}"}).status_code == 200
        described = httpx.get(server.base + "/openapi.json", headers={"X-API-Key": key})
        assert described.status_code == 200 and "/api/stitch/flows" in described.json()["paths"]
        assert httpx.get(server.base + "/api/stitch/health").status_code == 200  # open: load balancers probe it
        # An unauthenticated body is never read: a stranger cannot make the server parse anything.
        assert httpx.post(server.base + "/api/stitch/flows", content=b"{" * 10_000, headers=JSON).status_code == 401
    finally:
        server.stop()
