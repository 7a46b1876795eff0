"""GET /metrics: real flows through a real server, scraped and parsed by prometheus_client's own parser."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from agentloom.stitch import metrics
from tests.conftest import free_port
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder
from tests.stitch.worker import Worker

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
KEY = "metrics-test-key-0123456789"


def scrape(server: StitchServer, key: str | None = None) -> Samples:
    """One scrape, on a new connection (with several processes, any of them may answer)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = httpx.get(f"{server.base}/metrics", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def settled(server: StitchServer, key: str | None = None, timeout: float = 30) -> Samples:
    """A scrape once the backlog is empty (delivered webhooks are marked sent in batches)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(server, key)
        if value(samples, "stitch_dispatch_backlog") == 0:
            return samples
        assert time.monotonic() < deadline, f"the backlog stayed at {value(samples, 'stitch_dispatch_backlog')}"
        time.sleep(0.1)


def fan_out_flow(server: StitchServer, webhook: str, name: str = "fan") -> str:
    b = Builder(webhook)
    b.chain(b.node("Splitter", "s", arrayPath=""), b.node("Worker", "w"), b.node("Collector", "c"))
    flow_id: str = server.http.post("/flows", json={"name": name, "graph": b.graph()}).json()["id"]
    return flow_id


def one_worker_flow(server: StitchServer, webhook: str, name: str, **data: object) -> str:
    """A flow of one Worker whose node id is ``name`` (the test worker's flaky mode counts by node id)."""
    b = Builder(webhook)
    b.node("Worker", name, **data)
    flow_id: str = server.http.post("/flows", json={"name": name, "graph": b.graph()}).json()["id"]
    return flow_id


def start(server: StitchServer, flow_id: str, run_input: object) -> str:
    response = httpx.post(f"{server.base}/api/stitch/flows/{flow_id}/runs", json={"input": run_input}, timeout=30)
    assert response.status_code == 201, response.text
    run_id: str = response.json()["id"]
    return run_id


def test_a_fan_out_moves_the_counters_by_its_size(stitch: StitchServer, worker: Worker) -> None:
    before = scrape(stitch)
    for table in ("runs", "events", "attempts", "outbox", "timers"):
        assert ("stitch_pruned_rows_total", (("table", table),)) in before  # exposed before the first prune
        assert value(before, "stitch_pruned_rows_total", table=table) == 0
    assert value(before, "stitch_server_processes") == 1
    flow_id = fan_out_flow(stitch, worker.url)
    runs = [start(stitch, flow_id, list(range(5))) for _ in range(3)]
    for run_id in runs:
        assert stitch.wait_for(run_id)["status"] == "completed"
    after = settled(stitch)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("stitch_runs_started_total", flow=flow_id) == 3
    assert moved("stitch_runs_finished_total", flow=flow_id, status="completed") == 3
    assert moved("stitch_runs_finished_total", flow=flow_id, status="failed") == 0
    assert moved("stitch_node_completions_total", flow=flow_id) == 3 * (1 + 5 + 1)  # splitter, paths, collector
    assert moved("stitch_node_retries_total", flow=flow_id) == 0
    assert moved("stitch_callback_seconds_count", outcome="applied") == 15
    assert moved("stitch_callback_seconds_bucket", outcome="applied", le="+Inf") == 15
    assert moved("stitch_callback_seconds_sum", outcome="applied") > 0
    assert moved("stitch_dispatch_seconds_count", result="delivered") == 15
    assert moved("stitch_dispatch_seconds_count", result="failed") == 0
    assert moved("stitch_delivery_resends_total") == 0
    assert value(after, "stitch_dispatch_backlog") == 0
    assert value(after, "stitch_dispatch_oldest_pending_seconds") == 0
    assert value(after, "stitch_db_pool_in_use") >= 0


def test_the_backlog_counts_webhooks_not_yet_delivered(database_url: str, tmp_path: Path, worker: Worker) -> None:
    # The worker holds the webhook's answer until released; the send may take that long (and less
    # than the lease, or the webhook would be sent again).
    server = StitchServer(database_url, tmp_path, worker_timeout=25).start()
    try:
        flow_id = one_worker_flow(server, worker.url, "held", mode="hold")
        start(server, flow_id, 1)
        deadline = time.monotonic() + 20
        while len(worker.received) < 1:  # the webhook has reached the worker, which holds its answer
            assert time.monotonic() < deadline, "the webhook never reached the worker"
            time.sleep(0.05)
        waiting = scrape(server)
        assert value(waiting, "stitch_dispatch_backlog") == 1
        while value(waiting, "stitch_dispatch_oldest_pending_seconds") < 1.0:  # it ages by the server's clock
            assert value(waiting, "stitch_dispatch_backlog") == 1
            assert time.monotonic() < deadline, "the oldest pending webhook did not age"
            time.sleep(0.1)
            waiting = scrape(server)
        worker.release()
        settled(server)
    finally:
        worker.release()
        server.stop()


def test_failures_retries_and_undelivered_webhooks_are_counted(stitch: StitchServer, worker: Worker) -> None:
    before = scrape(stitch)
    flaky = one_worker_flow(stitch, worker.url, "flaky", mode="flaky", retry={"maxAttempts": 2, "backoffSeconds": 0})
    rejected = one_worker_flow(stitch, worker.url, "rejected", mode="reject")
    nobody = one_worker_flow(stitch, f"http://127.0.0.1:{free_port()}/work", "nobody")
    flaky_run, rejected_run, nobody_run = start(stitch, flaky, 1), start(stitch, rejected, 1), start(stitch, nobody, 1)
    assert stitch.wait_for(flaky_run)["status"] == "completed"
    assert stitch.wait_for(rejected_run)["status"] == "failed"
    assert stitch.wait_for(nobody_run)["status"] == "failed"
    # A failed run that is retried and fails again finishes again.
    assert stitch.http.post(f"/retry/{rejected_run}/rejected").status_code == 200
    deadline = time.monotonic() + 30
    while len(stitch.http.get(f"/runs/{rejected_run}/nodes/rejected/attempts").json()) < 2 or (
        stitch.http.get(f"/runs/{rejected_run}").json()["status"] != "failed"
    ):
        assert time.monotonic() < deadline, "the retried run did not fail again"
        time.sleep(0.05)
    after = settled(stitch)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("stitch_node_retries_total", flow=flaky) == 1  # the automatic retry
    assert moved("stitch_runs_finished_total", flow=flaky, status="completed") == 1
    assert moved("stitch_runs_finished_total", flow=flaky, status="failed") == 0
    assert moved("stitch_callback_seconds_count", outcome="applied") == 2  # the failure, then the success
    assert moved("stitch_node_retries_total", flow=rejected) == 1  # the manual retry
    assert moved("stitch_runs_finished_total", flow=rejected, status="failed") == 2
    assert moved("stitch_deliveries_failed_total", cause="worker_answered") == 2
    assert moved("stitch_runs_finished_total", flow=nobody, status="failed") == 1
    assert moved("stitch_deliveries_failed_total", cause="unreachable") == 1
    assert moved("stitch_delivery_resends_total") == 3  # 0.2, 0.4, 0.8 s, then it gave up
    assert moved("stitch_dispatch_seconds_count", result="failed") == 3
    assert moved("stitch_dispatch_seconds_count", result="delivered") == 2  # the flaky node's two attempts
    assert moved("stitch_runs_started_total", flow=nobody) == 1


def test_metrics_need_the_key_when_one_is_set(database_url: str, tmp_path: Path) -> None:
    server = StitchServer(database_url, tmp_path, api_key=KEY).start()
    try:
        refused = httpx.get(f"{server.base}/metrics", timeout=30)
        assert refused.status_code == 401 and "STITCH_API_KEY" in refused.json()["detail"]
        wrong = httpx.get(f"{server.base}/metrics", headers={"Authorization": "Bearer not-the-key-at-all"}, timeout=30)
        assert wrong.status_code == 401
        assert value(scrape(server, KEY), "stitch_server_processes") == 1
    finally:
        server.stop()


@pytest.mark.slow
def test_two_server_processes_add_up(database_url: str, tmp_path: Path, worker: Worker) -> None:
    server = StitchServer(database_url, tmp_path, workers=2).start()
    try:
        deadline = time.monotonic() + 30
        while value(scrape(server), "stitch_server_processes") < 2:  # the second may still be starting
            assert time.monotonic() < deadline, "only one server process reported"
            time.sleep(0.2)
        flow_id = fan_out_flow(server, worker.url)
        runs = [start(server, flow_id, list(range(4))) for _ in range(12)]  # a new connection each
        for run_id in runs:
            assert server.wait_for(run_id, timeout=60)["status"] == "completed"
        settled(server)
        # Each scrape is answered by one process and must show everyone's counts.
        for _ in range(8):
            samples = scrape(server)
            assert value(samples, "stitch_server_processes") == 2
            assert value(samples, "stitch_runs_started_total", flow=flow_id) == 12
            assert value(samples, "stitch_runs_finished_total", flow=flow_id, status="completed") == 12
            assert value(samples, "stitch_node_completions_total", flow=flow_id) == 12 * (1 + 4 + 1)
            assert value(samples, "stitch_callback_seconds_count", outcome="applied") == 48
            assert value(samples, "stitch_dispatch_seconds_count", result="delivered") == 48
            assert value(samples, "stitch_dispatch_backlog") == 0
            assert value(samples, "stitch_pruned_rows_total", table="runs") == 0
    finally:
        server.stop()


def server_processes_of(server: StitchServer) -> set[int]:
    """The pids of ``serve``'s worker processes (uvicorn spawns them; it also restarts one that dies)."""
    assert server.proc is not None
    found = set()
    for task in Path(f"/proc/{server.proc.pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(int(pid))
    return found


def every_file_says(directory: str) -> float:
    """stitch_server_processes summed over every file in the folder, a dead process's included."""
    return sum(
        sample.value
        for family in MultiProcessCollector(None, path=directory).collect()
        for sample in family.samples
        if sample.name == "stitch_server_processes"
    )


@pytest.mark.slow
def test_a_killed_process_keeps_its_counts_and_leaves_the_live_gauges(
    database_url: str, tmp_path: Path, worker: Worker
) -> None:
    server = StitchServer(database_url, tmp_path, workers=2).start()
    try:
        deadline = time.monotonic() + 30
        while value(scrape(server), "stitch_server_processes") < 2 or len(server_processes_of(server)) < 2:
            assert time.monotonic() < deadline, "the two server processes did not both start"
            time.sleep(0.2)
        flow_id = fan_out_flow(server, worker.url)
        runs = [start(server, flow_id, [1, 2]) for _ in range(6)]
        for run_id in runs:
            assert server.wait_for(run_id, timeout=60)["status"] == "completed"
        settled(server)
        victim = min(server_processes_of(server))
        environ = Path(f"/proc/{victim}/environ").read_text().split("\0")
        directory = dict(line.split("=", 1) for line in environ if "=" in line)["PROMETHEUS_MULTIPROC_DIR"]
        os.kill(victim, signal.SIGKILL)  # no shutdown: its files stay behind
        deadline = time.monotonic() + 60
        while every_file_says(directory) < 3:  # the dead process's 1, and the replacement's once it started
            assert time.monotonic() < deadline, "uvicorn did not replace the killed process"
            time.sleep(0.2)
        for _ in range(4):
            samples = scrape(server)
            assert value(samples, "stitch_server_processes") == 2  # not 3: the dead one's share was dropped
            assert value(samples, "stitch_runs_started_total", flow=flow_id) == 6  # its counts kept
            assert value(samples, "stitch_node_completions_total", flow=flow_id) == 6 * (1 + 2 + 1)
        assert every_file_says(directory) == 2  # the dead process's live gauge file is gone
    finally:
        server.stop()


def test_pruned_rows_are_labelled_by_the_short_table_name() -> None:
    """Retention reports its tables by their SQL names (stitch_runs); the metric shows them as listed at 0."""

    def counted() -> dict[str, float]:
        text = metrics.render(metrics.Backlog(0, 0.0)).decode()
        family = next(f for f in text_string_to_metric_families(text) if f.name == "stitch_pruned_rows")
        return {s.labels["table"]: s.value for s in family.samples if s.name.endswith("_total")}

    before = counted()
    assert set(before) == set(metrics.PRUNED_TABLES)
    metrics.pruned("stitch_runs", 3)
    metrics.pruned("stitch_events", 0)
    after = counted()
    assert set(after) == set(metrics.PRUNED_TABLES)
    assert after["runs"] - before["runs"] == 3 and after["events"] == before["events"]
