"""The HTTP API end to end: a real server process, a real worker, SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import create_engine, text

from agentloom.stitch.api import create_app
from agentloom.stitch.db import normalise_url
from agentloom.stitch.settings import StitchSettings
from tests.conftest import free_port
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker


def create(stitch: StitchServer, graph: dict, name: str = "flow") -> str:  # type: ignore[type-arg]
    response = stitch.http.post("/flows", json={"name": name, "graph": graph})
    assert response.status_code == 201, response.text
    return response.json()["id"]  # type: ignore[no-any-return]


def start(stitch: StitchServer, flow_id: str, run_input: object = None) -> str:
    response = stitch.http.post(f"/flows/{flow_id}/runs", json={"input": run_input})
    assert response.status_code == 201, response.text
    return response.json()["id"]  # type: ignore[no-any-return]


def wait_until(predicate, timeout: float = 20):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return value


def secret_of(database_url: str) -> str:
    engine = create_engine(normalise_url(database_url))
    with engine.connect() as conn:
        value = conn.execute(text("SELECT value FROM stitch_settings WHERE key = 'callback_secret'")).scalar_one()
    engine.dispose()
    return value  # type: ignore[no-any-return]


def sign(secret: str, run_id: str, key: str, attempt: int) -> str:
    return hmac.new(secret.encode(), f"{run_id}\n{key}\n{attempt}".encode(), hashlib.sha256).hexdigest()[:32]


@pytest.mark.slow
def test_flows_are_created_read_updated_and_validated(stitch: StitchServer) -> None:
    b = Builder()
    a, u = b.node("Worker", "a"), b.node("UX", "u")
    b.chain(a, u)
    flow_id = create(stitch, b.graph(), "first")
    flow = stitch.http.get(f"/flows/{flow_id}").json()
    assert flow["name"] == "first" and [n["id"] for n in flow["graph"]["nodes"]] == ["a", "u"]
    assert flow["graph"]["edges"][0]["source"] == "a" and flow["created_at"]
    updated = stitch.http.put(f"/flows/{flow_id}", json={"name": "renamed"}).json()
    assert updated["name"] == "renamed" and updated["version"] == 2
    assert [f["id"] for f in stitch.http.get("/flows").json()] == [flow_id]
    assert stitch.http.get("/flows/nope").status_code == 404

    def problem(graph: dict) -> str:  # type: ignore[type-arg]
        response = stitch.http.post("/flows", json={"name": "bad", "graph": graph})
        assert response.status_code == 422, response.text
        return "; ".join(item["msg"] for item in response.json()["detail"])

    assert "'Worker', 'UX', 'Splitter' or 'Collector'" in problem({"nodes": [{"id": "x", "type": "Robot"}]})
    assert "dangling" in problem(
        {"nodes": [{"id": "x", "type": "UX"}], "edges": [{"id": "e", "source": "x", "target": "y"}]}
    )
    cyclic = {
        "nodes": [{"id": "x", "type": "UX"}, {"id": "y", "type": "UX"}],
        "edges": [{"id": "e1", "source": "x", "target": "y"}, {"id": "e2", "source": "y", "target": "x"}],
    }
    assert "cycle" in problem(cyclic)
    assert "webhookUrl" in problem({"nodes": [{"id": "w", "type": "Worker", "data": {}}]})
    assert "no Splitter upstream" in problem({"nodes": [{"id": "c", "type": "Collector"}]})
    assert stitch.http.put(f"/flows/{flow_id}", json={"graph": cyclic}).status_code == 422


@pytest.mark.slow
def test_a_worker_chain_runs_with_the_documented_payload(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "fetch", mode="echo", extra=1), b.node("Worker", "node_1"))
    run_id = start(stitch, create(stitch, b.graph()), {"topic": "cats"})
    run = stitch.wait_for(run_id)
    assert run["status"] == "completed"
    assert run["node_states"]["node_1"]["output"] == {"topic": "cats"}
    first = worker.received[0]
    assert set(first) == {"runId", "nodeId", "config", "input", "callbackUrl"}
    assert (first["runId"], first["nodeId"], first["input"]) == (run_id, "fetch", {"topic": "cats"})
    assert first["config"]["extra"] == 1 and first["config"]["webhookUrl"] == worker.url
    assert first["callbackUrl"].startswith(f"{stitch.base}/api/stitch/callback/{run_id}/fetch?")
    assert [r["flow_id"] for r in stitch.http.get("/runs", params={"flow_id": run["flow_id"]}).json()["runs"]] == [
        run["flow_id"]
    ]
    events = [(e["node_key"], e["status"]) for e in stitch.http.get(f"/runs/{run_id}/events").json()]
    assert events == [("fetch", "running"), ("fetch", "completed"), ("node_1", "running"), ("node_1", "completed")]


@pytest.mark.slow
def test_fan_out_keeps_input_order_and_handles_nesting(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    split = b.node("Splitter", "split", arrayPath="batch.items")
    slow = b.node("Worker", "work", mode="late", delay=0.15, delayByInput=True)  # later items finish first
    gather = b.node("Collector", "gather")
    b.chain(split, slow, gather, b.node("Worker", "after"))
    run = stitch.wait_for(start(stitch, create(stitch, b.graph()), {"batch": {"items": [3, 2, 1, 0]}}))
    assert run["status"] == "completed"
    assert run["node_states"]["gather"]["output"] == [3, 2, 1, 0]
    assert [run["node_states"][f"work_{i}"]["input"] for i in range(4)] == [3, 2, 1, 0]
    assert run["node_states"]["after"]["input"] == [3, 2, 1, 0]

    n = Builder(worker.url)
    outer, inner = n.node("Splitter", "outer", arrayPath=""), n.node("Splitter", "inner", arrayPath="")
    leaf, c_in, c_out = n.node("Worker", "leaf"), n.node("Collector", "c_in"), n.node("Collector", "c_out")
    n.chain(outer, inner, leaf, c_in, c_out)
    run = stitch.wait_for(start(stitch, create(stitch, n.graph()), [[1, 2], [], [3]]))
    assert run["status"] == "completed"
    assert run["node_states"]["c_out"]["output"] == [[1, 2], [], [3]]
    assert run["node_states"]["leaf_0_1"]["output"] == 2 and run["node_states"]["c_in_1"]["output"] == []


@pytest.mark.slow
def test_an_empty_array_completes_the_splitter_and_fires_the_collector(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Splitter", "s"), b.node("Worker", "w"), b.node("Collector", "c"), b.node("Worker", "z"))
    run = stitch.wait_for(start(stitch, create(stitch, b.graph()), {"items": []}))
    assert run["status"] == "completed"
    assert run["node_states"]["s"]["status"] == "completed"
    assert run["node_states"]["c"]["output"] == [] and run["node_states"]["z"]["input"] == []
    assert worker.keys() == ["z"]


@pytest.mark.slow
def test_a_failed_path_fails_the_collector_and_stops_the_flow(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Splitter", "s"), b.node("Worker", "w", failOn=2), b.node("Collector", "c"), b.node("Worker", "z"))
    run = stitch.wait_for(start(stitch, create(stitch, b.graph()), {"items": [1, 2, 3]}))
    assert run["status"] == "failed"
    assert run["node_states"]["w_1"]["status"] == "failed"
    assert run["node_states"]["c"]["status"] == "failed" and "w_1" in run["node_states"]["c"]["error"]
    assert "z" not in worker.keys()


@pytest.mark.slow
def test_ux_gates_wait_for_a_person(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "draft"), b.node("UX", "review"), b.node("Worker", "publish"))
    run_id = start(stitch, create(stitch, b.graph()), {"text": "hi"})
    run = stitch.wait_for(run_id, ("waiting_for_user",))
    assert run["node_states"]["review"]["status"] == "waiting_for_user"
    # A webhook is committed with the state that fires its node: publish never fired, so none is owed.
    assert run["node_states"]["publish"]["status"] == "pending" and run["node_states"]["publish"]["attempt"] == 0
    assert worker.keys() == ["draft"]  # nothing fires past the gate
    assert stitch.http.post(f"/complete/{run_id}/draft", json={}).status_code == 400
    assert stitch.http.post(f"/complete/{run_id}/nope", json={}).status_code == 404
    assert stitch.http.post(f"/complete/{run_id}/review", json={"approved": True}).status_code == 200
    assert stitch.http.post(f"/complete/{run_id}/review", json={"approved": False}).status_code == 409
    run = stitch.wait_for(run_id)
    assert run["status"] == "completed" and run["node_states"]["publish"]["input"] == {"approved": True}


@pytest.mark.slow
def test_retry_reruns_a_failed_node_and_rejects_the_rest(
    stitch: StitchServer, worker: Worker, database_url: str
) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "ok"), b.node("Worker", "flaky", mode="flaky"))
    run_id = start(stitch, create(stitch, b.graph()), 5)
    run = stitch.wait_for(run_id)
    assert run["status"] == "failed" and run["node_states"]["flaky"]["error"] == "the worker was told to fail"
    assert stitch.http.post(f"/retry/{run_id}/ok").status_code == 400
    assert stitch.http.post(f"/retry/{run_id}/missing").status_code == 404
    assert stitch.http.post(f"/retry/{run_id}/flaky").status_code == 200
    run = stitch.wait_for(run_id, ("completed",))
    assert run["node_states"]["flaky"]["attempt"] == 2
    urls = [p["callbackUrl"] for p in worker.received if p["nodeId"] == "flaky"]
    assert [parse_qs(urlsplit(u).query)["attempt"] for u in urls] == [["1"], ["2"]]
    # The first attempt's callback is now late: 409. The second one again: a harmless 200.
    late = httpx.post(urls[0], json={"status": "completed", "output": 1})
    again = httpx.post(urls[1], json={"status": "completed", "output": 5})
    assert late.status_code == 409 and again.status_code == 200 and again.json()["duplicate"]


@pytest.mark.slow
def test_callbacks_are_signed_and_checked(stitch: StitchServer, worker: Worker, database_url: str) -> None:
    b = Builder(worker.url)
    b.chain(b.node("Worker", "w", mode="never"), b.node("UX", "gate"))
    run_id = start(stitch, create(stitch, b.graph()), 1)
    url = wait_until(lambda: worker.received)[0]["callbackUrl"]
    base = url.split("?")[0]
    body = {"status": "completed", "output": {"v": 1}}
    assert httpx.post(base, json=body).status_code == 403  # unsigned
    assert httpx.post(url.replace("attempt=1", "attempt=2"), json=body).status_code == 403  # altered
    assert httpx.post(url, json={"status": "done"}).status_code == 422
    secret = secret_of(database_url)
    unknown_run = f"{stitch.base}/api/stitch/callback/00000000-0000-0000-0000-000000000000/w"
    assert (
        httpx.post(
            unknown_run,
            params={"attempt": 1, "sig": sign(secret, "00000000-0000-0000-0000-000000000000", "w", 1)},
            json=body,
        ).status_code
        == 404
    )
    unknown_node = f"{stitch.base}/api/stitch/callback/{run_id}/zz"
    assert (
        httpx.post(unknown_node, params={"attempt": 1, "sig": sign(secret, run_id, "zz", 1)}, json=body).status_code
        == 404
    )
    pending_gate = f"{stitch.base}/api/stitch/callback/{run_id}/gate"
    assert (
        httpx.post(pending_gate, params={"attempt": 0, "sig": sign(secret, run_id, "gate", 0)}, json=body).status_code
        == 409
    )
    first = httpx.post(url, json=body)
    assert first.status_code == 200 and not first.json()["duplicate"]
    duplicate = httpx.post(url, json=body)
    assert duplicate.status_code == 200 and duplicate.json()["duplicate"]
    assert stitch.wait_for(run_id, ("waiting_for_user",))["node_states"]["w"]["output"] == {"v": 1}
    assert [e["node_key"] for e in stitch.http.get(f"/runs/{run_id}/events").json()].count("gate") == 1


@pytest.mark.slow
def test_duplicate_callbacks_from_the_worker_change_nothing(stitch: StitchServer, worker: Worker) -> None:
    b = Builder(worker.url)
    b.chain(
        b.node("Splitter", "s"), b.node("Worker", "w", mode="twice"), b.node("Collector", "c"), b.node("Worker", "z")
    )
    run_id = start(stitch, create(stitch, b.graph()), {"items": list(range(8))})
    run = stitch.wait_for(run_id)
    assert run["status"] == "completed" and run["node_states"]["c"]["output"] == list(range(8))
    events = stitch.http.get(f"/runs/{run_id}/events").json()
    assert [(e["node_key"], e["status"]) for e in events].count(("c", "completed")) == 1
    # One attempt of z, so one webhook (the outbox holds one per attempt), and it was sent (the run completed).
    assert [(e["node_key"], e["status"]) for e in events].count(("z", "running")) == 1
    assert stitch.http.get(f"/runs/{run_id}").json()["node_states"]["z"]["attempt"] == 1
    assert worker.keys().count("z") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode,reason",
    [("unreachable", "is unreachable"), ("reject", "answered HTTP 500"), ("slow", "did not answer within")],
)
def test_a_worker_that_cannot_take_the_job_fails_the_node(
    database_url: str, tmp_path, worker: Worker, mode: str, reason: str
) -> None:  # type: ignore[no-untyped-def]
    server = StitchServer(database_url, tmp_path, worker_timeout=1.0).start()
    try:
        url = f"http://127.0.0.1:{free_port()}/gone" if mode == "unreachable" else worker.url
        b = Builder(url)
        b.node("Worker", "w", mode=mode, delay=3)
        run = server.wait_for(start(server, create(server, b.graph())))
        assert run["status"] == "failed"
        assert reason in run["node_states"]["w"]["error"] and url in run["node_states"]["w"]["error"]
    finally:
        server.stop()


@pytest.mark.slow
def test_docs_work_with_no_internet(stitch: StitchServer) -> None:
    page = httpx.get(f"{stitch.base}/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text) + re.findall(r"url: '([^']+)'", page.text)
    assert len(urls) >= 4 and "/openapi.json" in urls
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), f"{url} is not on this server"
        assert httpx.get(stitch.base + url).status_code == 200, url
    assert "http://" not in page.text and "https://" not in page.text
    bundle = httpx.get(f"{stitch.base}/docs-assets/swagger-ui-bundle.js")
    assert "javascript" in bundle.headers["content-type"] and len(bundle.content) > 500_000
    assert '"validatorUrl": null' in page.text  # Swagger UI would otherwise call validator.swagger.io
    assert httpx.get(f"{stitch.base}/redoc").status_code == 404  # ReDoc has no local bundle: not offered
    paths = httpx.get(f"{stitch.base}/openapi.json").json()["paths"]
    assert {
        "/api/stitch/flows",
        "/api/stitch/callback/{run_id}/{node_id}",
        "/api/stitch/retry/{run_id}/{node_id}",
        "/api/stitch/complete/{run_id}/{node_id}",
        "/api/stitch/runs/{run_id}",
        "/api/stitch/runs/{run_id}/cancel",
        "/api/stitch/runs/waiting",
        "/api/stitch/runs/{run_id}/nodes/{node_id}/attempts",
    } <= set(paths)


def openapi(**settings: object) -> dict:  # type: ignore[type-arg]
    return create_app(StitchSettings(base_url="http://127.0.0.1:1", **settings), "sqlite://").openapi()


def test_the_openapi_description_has_real_schemas_and_every_status() -> None:
    spec = openapi()
    assert spec["openapi"].startswith("3.1")  # what Swagger UI 5 (the bundled one) renders
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            codes = set(operation["responses"])
            success = next(c for c in codes if c.startswith("2"))
            content = operation["responses"][success]["content"]
            if path.endswith("/stream"):  # server-sent events, described as such
                assert set(content) == {"text/event-stream"}, where
            else:
                schema = content["application/json"]["schema"]
                assert "$ref" in schema or "$ref" in schema.get("items", {}), f"{where}: {schema}"
            assert {"422", "503"} <= codes and "401" not in codes, where
            assert operation.get("description") or path.endswith("/health"), where
            for code in codes - {success}:
                assert operation["responses"][code]["description"] != "Successful Response", (where, code)
    ops = spec["paths"]
    assert {"403", "404", "409", "413"} <= set(ops["/api/stitch/callback/{run_id}/{node_id}"]["post"]["responses"])
    assert {"400", "404", "409", "413", "415"} <= set(
        ops["/api/stitch/complete/{run_id}/{node_id}"]["post"]["responses"]
    )
    assert {"404", "409"} <= set(ops["/api/stitch/flows/{flow_id}"]["delete"]["responses"])
    assert {"404", "409"} <= set(ops["/api/stitch/runs/{run_id}/cancel"]["post"]["responses"])
    assert (
        "413" in ops["/api/stitch/flows"]["post"]["responses"]
        and "413" not in ops["/api/stitch/flows"]["get"]["responses"]
    )
    for path in ("/flows/{flow_id}/versions", "/flows/{flow_id}/versions/{version}", "/flows/{flow_id}/diff"):
        assert "404" in ops[f"/api/stitch{path}"]["get"]["responses"], path
    assert [p["name"] for p in ops["/api/stitch/flows/{flow_id}/diff"]["get"]["parameters"]] == [
        "flow_id",
        "from",
        "to",
    ]
    assert "413" in ops["/api/stitch/flows/validate"]["post"]["responses"]
    listing = {p["name"]: p for p in ops["/api/stitch/runs"]["get"]["parameters"]}
    assert set(listing) == {"status", "flow_id", "cursor", "limit"}
    assert "cancelled" in str(listing["status"]["schema"])
    schemas = spec["components"]["schemas"]
    state = schemas["NodeStateReply"]["properties"]
    assert {"prompt", "paths", "path", "attempt"} <= set(state) and "data.prompt" in state["prompt"]["description"]
    assert schemas["RunReply"]["properties"]["created_at"]["format"] == "date-time"
    assert "Z" in schemas["RunReply"]["properties"]["created_at"]["description"]
    assert set(schemas["EventReply"]["properties"]) == {"ok", "detail", "duplicate"}
    assert schemas["FlowIn"]["properties"]["graph"]["$ref"] == "#/components/schemas/Graph"  # read as sent, described
    assert "inputSchema" in schemas["Graph"]["properties"] and "input_schema" in schemas["WaitingGate"]["properties"]
    assert {"node_id", "edge_id", "field"} <= set(schemas["Problem"]["properties"])

    keyed = openapi(api_key="k" * 20)["paths"]
    assert "401" in keyed["/api/stitch/runs"]["get"]["responses"]
    assert "401" not in keyed["/api/stitch/callback/{run_id}/{node_id}"]["post"]["responses"]  # signed, no key
    assert "401" not in keyed["/api/stitch/health"]["get"]["responses"]


@pytest.mark.slow
def test_the_run_view_and_events_of_an_unknown_run(stitch: StitchServer) -> None:
    assert stitch.http.get("/runs/00000000-0000-0000-0000-000000000000").status_code == 404
    assert stitch.http.get("/runs/00000000-0000-0000-0000-000000000000/events").status_code == 404
    assert stitch.http.get("/runs/not-a-run").status_code == 404
