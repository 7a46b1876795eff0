"""Wide fan-outs at flat cost, through a real server on SQLite and PostgreSQL: one run of 2,000 paths
goes at >= 0.8x the per-path rate of a 100-path run (same server, same worker), and the run page
and the console's page for it answer all the while. (What an event reads and writes, whatever
the width, is tested event by event in test_operations.py.)"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder


class Reader(threading.Thread):
    """GETs the run page and the console's page for a run, in turn, until stopped."""

    def __init__(self, stitch: StitchServer, run_id: str) -> None:
        super().__init__(daemon=True)
        self.paths = (f"{stitch.base}/api/stitch/runs/{run_id}", f"{stitch.base}/runs/{run_id}")
        self.answers: list[tuple[int, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                for url in self.paths:
                    started = time.perf_counter()
                    status = client.get(url).status_code
                    self.answers.append((status, time.perf_counter() - started))
                self.stop.wait(0.5)


def one_run(stitch: StitchServer, flow_id: str, width: int, reader: bool = False) -> tuple[float, Reader | None]:
    started = time.perf_counter()
    run = stitch.http.post(f"/flows/{flow_id}/runs", json={"input": {"items": list(range(width))}})
    assert run.status_code == 201, run.text
    run_id = run.json()["id"]
    watching = Reader(stitch, run_id) if reader else None
    if watching:
        watching.start()
    deadline = time.monotonic() + 240
    while True:  # the flow's newest run, from the list: a light read, whatever the width
        (newest,) = stitch.http.get("/runs", params={"flow_id": flow_id, "limit": 1}).json()["runs"]
        assert newest["id"] == run_id
        if newest["status"] != "running":
            break
        assert time.monotonic() < deadline, f"the {width}-path run did not finish in 240 s"
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    if watching:
        watching.stop.set()
        watching.join()
    shown = stitch.http.get(f"/runs/{run_id}").json()
    assert shown["status"] == "completed", shown["status"]
    assert shown["node_states"]["gather"]["output"] == list(range(width))
    return elapsed, watching


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_thousand_paths_go_at_the_per_path_rate_of_a_hundred(stitch: StitchServer, echo_worker: str) -> None:
    b = Builder(f"{echo_worker}/work")
    b.node("Splitter", "split")
    b.node("Worker", "work")
    b.node("Collector", "gather")
    b.chain("split", "work", "gather")
    flow = stitch.http.post("/flows", json={"name": "wide", "graph": b.graph()})
    assert flow.status_code == 201, flow.text
    flow_id = flow.json()["id"]
    one_run(stitch, flow_id, 20)  # warm-up

    # The same number of paths either way (ten 100-path runs, one after the other, against one 2,000-path
    # run, twice each, alternating); each width's better time: another test's load only slows runs down.
    narrow, wide, reader = float("inf"), float("inf"), None
    for _ in range(2):
        narrow = min(narrow, sum(one_run(stitch, flow_id, 100)[0] for _ in range(10)) / 10)
        elapsed, reader = one_run(stitch, flow_id, 2000, reader=True)
        wide = min(wide, elapsed)

    ratio = (2000 / wide) / (100 / narrow)
    assert ratio >= 0.8, f"2,000 paths in {wide:.1f} s, 100 in {narrow:.2f} s: {ratio:.2f}x the per-path rate"
    assert reader is not None and len(reader.answers) >= 4, reader and reader.answers
    assert {status for status, _ in reader.answers} == {200}
    assert max(seconds for _, seconds in reader.answers) < 10
