"""What else Stitch interprets of what a user sends, tried with the worst values: a Splitter's
``arrayPath`` and the array it fans out, the run stream's ``after`` and ``Last-Event-ID``, the
run list's filters, and the metric labels flows create. Through a running ``agentloom stitch
serve`` on SQLite and PostgreSQL (the labels: in this process). A clear answer, no traceback."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from agentloom.stitch import metrics
from tests.stitch.conftest import StitchServer
from tests.stitch.hostile import assert_clean_log

pytestmark = pytest.mark.slow
UPPER = "0A0A0A0A-0A0A-0A0A-0A0A-0A0A0A0A0A0A"  # a run id, but not as this server writes one


def splitter_flow(stitch: StitchServer, array_path: str | None) -> str:
    data = {} if array_path is None else {"arrayPath": array_path}
    graph = {
        "nodes": [
            {"id": "s", "type": "Splitter", "position": {"x": 0, "y": 0}, "data": data},
            {"id": "ask", "type": "UX", "position": {"x": 0, "y": 0}, "data": {}},
        ],
        "edges": [{"id": "e", "source": "s", "target": "ask"}],
    }
    made = stitch.http.post("/flows", json={"name": "split", "graph": graph})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def splitter_error(stitch: StitchServer, flow_id: str, run_input: Any) -> str:
    run = stitch.http.post(f"/flows/{flow_id}/runs", json={"input": run_input})
    assert run.status_code == 201, run.text
    state = run.json()["node_states"]["s"]
    assert state["status"] == "failed" and run.json()["status"] == "failed", state
    return str(state["error"])


def test_array_paths_and_arrays_of_any_shape_fail_the_splitter_in_words(stitch: StitchServer) -> None:
    digits = "9" * 5_000  # more digits than Python converts to an int
    for path, value in [
        (f"items.{digits}", {"items": [1]}),
        ("items." + "0" * 5_000, {"items": [[1]]}),  # index 0, spelt with more digits than Python converts
        ("items.²", {"items": [1, 2, 3]}),  # a Unicode digit is no index
        ("x" * 50_000, {}),
    ]:
        error = splitter_error(stitch, splitter_flow(stitch, path), value)
        assert "does not exist in the input" in error and len(error) < 600, error[:700]
    wide = splitter_flow(stitch, "items")
    error = splitter_error(stitch, wide, {"items": [0] * 10_001})
    assert "10,001 elements" in error and "at most 10,000 paths" in error
    fits = stitch.http.post(f"/flows/{wide}/runs", json={"input": {"items": [0] * 3}})
    assert fits.json()["node_states"]["s"]["status"] == "completed"
    assert_clean_log(stitch)


def test_stream_offsets_of_any_size_or_script_are_answered(stitch: StitchServer) -> None:
    flow_id = splitter_flow(stitch, None)
    run_id = stitch.http.post(f"/flows/{flow_id}/runs", json={"input": [1]}).json()["id"]
    huge = stitch.http.get(f"/runs/{run_id}/stream", params={"after": 10**30})
    assert huge.status_code == 422 and "after" in huge.text
    for header in (b"\xb2", "²".encode(), b"9" * 5_000, b"-1", b"12 x", b"\xff\xfe"):
        with httpx.Client(base_url=stitch.base + "/api/stitch", timeout=10) as client:
            with client.stream("GET", f"/runs/{run_id}/stream", headers={"Last-Event-ID": header}) as reply:
                assert reply.status_code == 200, header[:20]
                assert reply.headers["content-type"].startswith("text/event-stream")
    assert_clean_log(stitch)


def test_run_list_filters_refuse_what_they_cannot_use(stitch: StitchServer) -> None:
    for params, field in [
        ({"cursor": "x" * 10_000}, "cursor"),
        ({"cursor": "\U0001f600" * 100}, "cursor"),
        ({"flow_id": "'; DROP TABLE stitch_runs; --"}, "flow_id"),
        ({"limit": 10**30}, "limit"),
        ({"status": "running" * 1000}, "status"),
        ({"cursor": base64.urlsafe_b64encode(b"2026-1-1T0:0:0.0|" + b"a" * 36).decode()}, "cursor"),
        ({"cursor": base64.urlsafe_b64encode(f"2026-01-01T00:00:00.000000|{UPPER}".encode()).decode()}, "cursor"),
    ]:
        reply = stitch.http.get("/runs", params=params)
        assert reply.status_code == 422, (params, reply.text[:300])
        assert field in reply.text
        assert len(reply.content) < 2_000, reply.text[:300]  # the value is named, not echoed whole
    assert stitch.http.get("/runs").status_code == 200
    assert_clean_log(stitch)


def test_metric_series_per_flow_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_labelled", set())
    flows = [f"00000000-0000-0000-0000-{i:012d}" for i in range(metrics.MAX_FLOW_LABELS + 5)]
    for flow_id in flows:
        metrics.run_started(flow_id)
    text = metrics.render(metrics.Backlog(0, 0.0)).decode()
    started = [line for line in text.splitlines() if line.startswith("stitch_runs_started_total{")]
    labels = {line.split('flow="', 1)[1].split('"', 1)[0] for line in started}
    assert flows[0] in labels and flows[metrics.MAX_FLOW_LABELS - 1] in labels
    assert flows[-1] not in labels and "other" in labels
    metrics.run_started(flows[0])  # a flow already labelled keeps its series


def test_replies_name_what_was_sent_without_echoing_it(stitch: StitchServer) -> None:
    long_id = "n" * 200_000
    graph = {
        "nodes": [{"id": long_id, "type": "UX", "position": {"x": 0, "y": 0}}, {"id": "a", "type": "UX"}],
        "edges": [{"id": "e" * 100_000, "source": "a", "target": "t" * 100_000}],
    }
    checked = stitch.http.post("/flows/validate", json={"graph": graph})
    assert checked.status_code == 200 and len(checked.content) < 8_000, checked.text[:300]
    assert {p["rule"] for p in checked.json()["problems"]} >= {"node_id"}
    nameless = stitch.http.post("/flows", json={"graph": graph})  # no name
    assert nameless.status_code == 422 and len(nameless.content) < 8_000, nameless.text[:300]
    assert "name" in nameless.text
    assert_clean_log(stitch)
