"""Wide fan-outs through a real server on SQLite and PostgreSQL: one run of 2,000 paths completes
every path once and gathers them in order, while the run page and the console's page for it
answer. How fast, against a 100-path run, is a benchmark figure (benchmarks/stitch_fanout.py,
BENCHMARKS.md "Stitch fan-out", goal >= 0.8x); what an event reads and writes, whatever the
width, is tested event by event in test_operations.py."""

from __future__ import annotations

import pytest

from benchmarks.stitch_fanout import one_run
from tests.stitch.conftest import StitchServer
from tests.stitch.graphs import Builder


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_thousand_paths_complete_once_in_order_while_the_run_page_answers(
    stitch: StitchServer, echo_worker: str
) -> None:
    b = Builder(f"{echo_worker}/work")
    b.node("Splitter", "split")
    b.node("Worker", "work")
    b.node("Collector", "gather")
    b.chain("split", "work", "gather")
    flow = stitch.http.post("/flows", json={"name": "wide", "graph": b.graph()})
    assert flow.status_code == 201, flow.text
    flow_id = flow.json()["id"]

    _, reader = one_run(stitch.http, stitch.base, flow_id, 2000, True)  # raises unless gathered in order
    assert reader is not None
    (run,) = stitch.http.get("/runs", params={"flow_id": flow_id, "limit": 1}).json()["runs"]
    states = stitch.http.get(f"/runs/{run['id']}").json()["node_states"]
    paths = {key: state for key, state in states.items() if state["node_id"] == "work" and state["path"]}
    assert len(paths) == 2000
    assert {(state["status"], state["attempt"]) for state in paths.values()} == {("completed", 1)}
    assert len(reader.api) >= 1 and len(reader.page) >= 1  # read while the run went on
    assert reader.errors == 0  # every answer 200
