"""The web console end to end: a real `agentloom stitch serve` (SQLite and PostgreSQL), a real
HTTP worker, and a real headless Chromium driven by Playwright. Every change a test waits for
arrives without a reload (the page keeps a marker that a reload would clear)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.stitch.browser import browser, page, screenshot  # noqa: F401 - fixtures
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

UUID = r"[0-9a-f-]{36}"


def new_flow(stitch: StitchServer, graph: dict[str, Any], name: str) -> str:
    reply = stitch.http.post("/flows", json={"name": name, "graph": graph})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def start(stitch: StitchServer, flow_id: str, value: Any = None) -> str:
    reply = stitch.http.post(f"/flows/{flow_id}/runs", json={"input": value})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def mark(page: Page) -> None:
    page.evaluate("window.__stillHere = true")


def not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__stillHere === true"), "the page was reloaded"


def node(page: Page, node_id: str) -> Any:
    return page.get_by_test_id(f"node-{node_id}")


def laid_out(worker: Worker, *, first: dict[str, Any] | None = None) -> dict[str, Any]:
    b = Builder(worker.url)
    b.node("Worker", "fetch", **(first or {}))
    b.node("Worker", "summarise")
    b.chain("fetch", "summarise")
    for i, n in enumerate(b.nodes):
        n["position"] = {"x": 250 * i, "y": 100}
    return b.graph()


def test_a_run_started_from_the_flow_page_turns_completed_live(
    stitch: StitchServer, worker: Worker, page: Page
) -> None:
    flow_id = new_flow(stitch, laid_out(worker, first={"mode": "late", "delay": 3.0}), "two steps")
    page.goto(f"{stitch.base}/flows/{flow_id}")
    expect(node(page, "fetch")).to_have_attribute("data-type", "Worker")
    expect(node(page, "summarise")).to_be_visible()
    screenshot(page, "flow")
    page.get_by_test_id("run-input").fill("{not json")
    page.get_by_test_id("start-run").click()
    expect(page.get_by_test_id("run-input-error")).to_be_visible()
    assert stitch.http.get("/runs", params={"flow_id": flow_id}).json()["runs"] == []  # nothing was sent
    page.get_by_test_id("run-input").fill('{"topic": "stitch"}')
    page.get_by_test_id("start-run").click()
    page.wait_for_url(re.compile(rf"/runs/{UUID}$"))
    mark(page)
    expect(node(page, "fetch")).to_have_attribute("data-status", "running")
    expect(node(page, "summarise")).to_have_attribute("data-status", "completed", timeout=20_000)
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "completed")
    expect(page.get_by_test_id("timeline-event")).to_have_count(4)
    not_reloaded(page)
    run_id = page.url.rsplit("/", 1)[1]
    assert stitch.http.get(f"/runs/{run_id}").json()["input"] == {"topic": "stitch"}
    node(page, "summarise").click()
    panel = page.get_by_test_id("node-panel")
    expect(panel).to_have_attribute("data-key", "summarise")
    expect(panel).to_contain_text("stitch")  # its input and output
    expect(page.get_by_test_id("attempt-row")).to_have_count(1)
    screenshot(page, "run")
    html = page.content()
    assert "callbackUrl" not in html and "sig=" not in html and "/api/stitch/callback/" not in html
    page.go_back()  # the address is the view: back to the flow
    page.wait_for_url(f"{stitch.base}/flows/{flow_id}")
    expect(node(page, "fetch")).to_be_visible()
    page.reload()
    expect(page.get_by_test_id("run-row")).to_have_count(1)


def test_a_fan_out_of_50_paths_is_counted_and_expandable(stitch: StitchServer, worker: Worker, page: Page) -> None:
    b = Builder(worker.url)
    b.node("Worker", "load")
    b.node("Splitter", "split", arrayPath="items")
    b.node("Worker", "work")
    b.node("Collector", "gather")
    b.chain("load", "split", "work", "gather")
    for i, n in enumerate(b.nodes):
        n["position"] = {"x": 220 * i, "y": 80 * (i % 2)}
    flow_id = new_flow(stitch, b.graph(), "fan-out")
    page.goto(f"{stitch.base}/flows/{flow_id}")
    expect(node(page, "split")).to_have_attribute("data-type", "Splitter")
    expect(node(page, "gather")).to_have_attribute("data-type", "Collector")
    page.get_by_test_id("run-input").fill(json.dumps({"items": list(range(50))}))
    page.get_by_test_id("start-run").click()
    page.wait_for_url(re.compile(rf"/runs/{UUID}$"))
    mark(page)
    expect(node(page, "gather")).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(node(page, "work").get_by_test_id("fanout-counts")).to_contain_text("50 completed")
    node(page, "work").click()
    paths = page.get_by_test_id(re.compile(r"^path-work_\d+$"))
    expect(paths).to_have_count(50)
    expect(page.get_by_test_id("path-work_49")).to_have_attribute("data-status", "completed")
    page.get_by_test_id("path-work_7").click()
    expect(page.get_by_test_id("node-panel")).to_have_attribute("data-key", "work_7")
    not_reloaded(page)
    screenshot(page, "fan-out")


def test_a_gate_is_completed_from_the_page_with_its_prompt(stitch: StitchServer, worker: Worker, page: Page) -> None:
    b = Builder(worker.url)
    b.node("Worker", "draft")
    b.node("UX", "review", prompt="Approve the draft?")
    b.node("Worker", "publish")
    b.chain("draft", "review", "publish")
    run_id = start(stitch, new_flow(stitch, b.graph(), "gated"), {"text": "hello"})
    stitch.wait_for(run_id, ("waiting_for_user",))
    page.goto(stitch.base + "/")
    expect(page.get_by_test_id("waiting-gate")).to_have_count(1)
    page.goto(f"{stitch.base}/runs/{run_id}")
    mark(page)
    expect(node(page, "review")).to_have_attribute("data-status", "waiting_for_user")
    node(page, "review").click()
    expect(page.get_by_test_id("gate-prompt")).to_have_text("Approve the draft?")
    screenshot(page, "gate")
    page.get_by_test_id("gate-input").fill('{"approved": true}')
    page.get_by_test_id("complete-gate").click()
    expect(node(page, "publish")).to_have_attribute("data-status", "completed")
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "completed")
    not_reloaded(page)
    assert stitch.http.get(f"/runs/{run_id}").json()["node_states"]["review"]["output"] == {"approved": True}


def test_a_failed_node_is_retried_from_the_page(stitch: StitchServer, worker: Worker, page: Page) -> None:
    flow_id = new_flow(stitch, laid_out(worker, first={"mode": "flaky"}), "flaky")
    run_id = start(stitch, flow_id, 1)
    stitch.wait_for(run_id, ("failed",))
    page.goto(f"{stitch.base}/runs/{run_id}")
    mark(page)
    expect(node(page, "fetch")).to_have_attribute("data-status", "failed")
    node(page, "fetch").click()
    expect(page.get_by_test_id("attempt-row")).to_have_count(1)
    screenshot(page, "failed")
    page.get_by_test_id("retry-node").click()
    expect(node(page, "summarise")).to_have_attribute("data-status", "completed")
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "completed")
    expect(page.get_by_test_id("attempt-row")).to_have_count(2)  # both attempts, the first with its error
    not_reloaded(page)


def test_a_refused_action_shows_the_servers_reason(stitch: StitchServer, worker: Worker, page: Page) -> None:
    run_id = start(stitch, new_flow(stitch, laid_out(worker, first={"mode": "flaky"}), "race"), 1)
    stitch.wait_for(run_id, ("failed",))
    page.route("**/stream*", lambda route: route.abort())  # no live updates: the page still shows the failure
    page.goto(f"{stitch.base}/runs/{run_id}")
    node(page, "fetch").click()
    expect(page.get_by_test_id("retry-node")).to_be_visible()
    assert stitch.http.post(f"/retry/{run_id}/fetch").status_code == 200  # someone else retried first
    stitch.wait_for(run_id, ("completed",))
    page.get_by_test_id("retry-node").click()
    expect(page.get_by_test_id("action-error")).to_contain_text("only failed nodes can be retried")


def test_a_run_is_cancelled_from_the_page(stitch: StitchServer, worker: Worker, page: Page) -> None:
    run_id = start(stitch, new_flow(stitch, laid_out(worker, first={"mode": "never"}), "stuck"))
    page.goto(f"{stitch.base}/runs/{run_id}")
    mark(page)
    expect(node(page, "fetch")).to_have_attribute("data-status", "running")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("cancel-run").click()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "cancelled")
    expect(node(page, "fetch")).to_have_attribute("data-status", "cancelled")
    not_reloaded(page)


def test_flows_are_imported_and_exported_and_runs_listed_live(
    stitch: StitchServer, worker: Worker, page: Page, tmp_path: Path
) -> None:
    graph = laid_out(worker)
    good, bad = tmp_path / "imported.json", tmp_path / "broken.json"
    good.write_text(json.dumps(graph))
    bad.write_text(
        json.dumps({"name": "broken", "graph": {"nodes": [{"id": "w", "type": "Worker", "data": {}}], "edges": []}})
    )
    page.goto(stitch.base + "/")
    page.get_by_test_id("import-flow").set_input_files(str(bad))
    expect(page.get_by_test_id("import-error")).to_contain_text("webhookUrl")
    page.get_by_test_id("import-flow").set_input_files(str(good))
    row = page.get_by_test_id("flow-row")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("imported")
    flow_id = row.get_attribute("data-flow-id")
    assert stitch.http.get(f"/flows/{flow_id}").json()["graph"]["nodes"][0]["id"] == "fetch"
    screenshot(page, "flows")
    page.goto(f"{stitch.base}/flows/{flow_id}")
    with page.expect_download() as download:
        page.get_by_test_id("export-flow").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["name"] == "imported" and [n["id"] for n in exported["graph"]["nodes"]] == ["fetch", "summarise"]
    page.goto(f"{stitch.base}/runs")
    mark(page)
    run_id = start(stitch, flow_id, 1)
    expect(page.locator(f'[data-testid="run-row"][data-run-id="{run_id}"]')).to_have_attribute(
        "data-status", "completed"
    )
    failing = new_flow(stitch, laid_out(worker, first={"mode": "fail"}), "failing")
    failed_run = start(stitch, failing, 1)
    stitch.wait_for(failed_run, ("failed",))
    page.get_by_test_id("status-filter").select_option("failed")
    expect(page.get_by_test_id("run-row")).to_have_count(1)
    expect(page.get_by_test_id("run-row")).to_have_attribute("data-run-id", failed_run)
    screenshot(page, "runs")
    not_reloaded(page)


def test_the_run_list_pages_through_many_runs(stitch: StitchServer, worker: Worker, page: Page) -> None:
    flow_id = new_flow(stitch, laid_out(worker, first={"mode": "never"}), "many")
    started = [start(stitch, flow_id) for _ in range(120)]
    page.goto(f"{stitch.base}/flows/{flow_id}")
    rows = page.get_by_test_id("run-row")
    expect(rows.first).to_have_attribute("data-run-id", started[-1])  # newest first
    shown = rows.count()
    assert 0 < shown < 120
    seen = {rows.nth(i).get_attribute("data-run-id") for i in range(shown)}
    while len(seen) < 120:
        before = rows.first.get_attribute("data-run-id")
        page.get_by_test_id("next-page").click()
        expect(rows.first).not_to_have_attribute("data-run-id", before or "")
        seen |= {rows.nth(i).get_attribute("data-run-id") for i in range(rows.count())}
    assert seen == set(started)
    page.get_by_test_id("prev-page").click()
    expect(rows.first).not_to_have_attribute("data-run-id", started[0])


def test_a_keyed_server_asks_for_the_key_and_keeps_it_out_of_urls(tmp_path: Path, worker: Worker, page: Page) -> None:
    key = "console-key-" + "x" * 20
    server = StitchServer(f"sqlite:///{tmp_path / 'keyed.db'}", tmp_path, api_key=key).start()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    try:
        flow_id = new_flow(server, laid_out(worker), "secret flow")
        page.goto(server.base + "/")
        expect(page.get_by_test_id("login-form")).to_be_visible()
        screenshot(page, "login")
        page.get_by_test_id("api-key").fill("wrong-key-wrong-key")
        page.get_by_test_id("login-submit").click()
        expect(page.get_by_test_id("login-error")).to_be_visible()
        page.get_by_test_id("api-key").fill(key)
        page.get_by_test_id("login-submit").click()
        expect(page.get_by_test_id("flow-row")).to_contain_text("secret flow")
        page.goto(f"{server.base}/flows/{flow_id}")  # a reload keeps the session's key
        expect(node(page, "fetch")).to_be_visible()
        assert not any(key in url for url in requests)
        assert key not in page.url
        assert httpx.get(f"{server.base}/api/stitch/flows").status_code == 401
        page.get_by_test_id("logout").click()
        expect(page.get_by_test_id("login-form")).to_be_visible()
    finally:
        server.stop()


def test_the_flow_page_says_how_long_finished_runs_are_kept(stitch: StitchServer, worker: Worker, page: Page) -> None:
    flow_id = new_flow(stitch, laid_out(worker), "kept")
    page.goto(f"{stitch.base}/flows/{flow_id}")
    expect(page.get_by_test_id("retention")).to_have_text("Finished runs are kept 14 days, at most 10,000 per flow.")
