"""The console's starters (console/src/designer/starters.json, the data the designer offers under
Flows → New flow) against a real server: each one is a valid flow whose nodes receive what they
need, the Approval starter's last Worker gets the draft and the person's answer in a real run,
and the designer's check warns where a node after a gate would receive the answer alone."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.stitch.conftest import StitchServer
from tests.stitch.test_api import create, start, wait_until
from tests.stitch.worker import Worker

STARTERS = Path(__file__).resolve().parents[2] / "console" / "src" / "designer" / "starters.json"


def starters() -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in json.loads(STARTERS.read_text(encoding="utf-8"))}


def filled(graph: dict[str, Any], url: str, **modes: str) -> dict[str, Any]:
    """The starter's graph with each Worker's webhook URL filled in, as a person does first."""
    graph = copy.deepcopy(graph)
    for node in graph["nodes"]:
        if node["type"] == "Worker":
            node["data"]["webhookUrl"] = url
            if node["id"] in modes:
                node["data"]["mode"] = modes[node["id"]]
    return graph


@pytest.mark.slow
def test_every_starter_is_a_valid_flow_without_warnings(stitch: StitchServer) -> None:
    offered = starters()
    assert set(offered) == {"empty", "worker-chain", "fan-out", "approval"}
    for starter_id, starter in offered.items():
        if not starter["graph"]["nodes"]:
            continue  # the blank canvas
        reply = stitch.http.post("/flows/validate", json={"graph": filled(starter["graph"], "http://127.0.0.1:9/work")})
        assert reply.json() == {"valid": True, "problems": [], "warnings": []}, starter_id


@pytest.mark.slow
def test_a_node_after_a_gate_alone_gets_a_warning_that_says_what_why_and_the_fix(stitch: StitchServer) -> None:
    graph = filled(starters()["approval"]["graph"], "http://127.0.0.1:9/work")
    graph["edges"] = [e for e in graph["edges"] if e["id"] != "e-draft-publish"]  # the starter as it was
    reply = stitch.http.post("/flows/validate", json={"graph": graph}).json()
    assert reply["valid"] is True and reply["problems"] == []  # a warning: saving is still allowed
    assert [(w["rule"], w["node_id"]) for w in reply["warnings"]] == [("gate_answer_only", "publish")]
    message = reply["warnings"][0]["message"]
    assert message.startswith("Worker 'publish' will receive only the answer given at UX gate 'review', not the output")
    assert "of 'draft'" in message and "a gate's output is the person's answer" in message
    assert "add an edge from 'draft' to 'publish' too" in message

    # Two gates in a row, and a second Worker before the gate: every output lost is named.
    graph["nodes"].append({"id": "second", "type": "UX", "position": {"x": 0, "y": 0}, "data": {}})
    graph["nodes"].append(
        {"id": "notes", "type": "Worker", "position": {"x": 0, "y": 0}, "data": {"webhookUrl": "http://127.0.0.1:9/w"}}
    )
    graph["edges"] += [
        {"id": "e-notes-review", "source": "notes", "target": "review"},
        {"id": "e-draft-second", "source": "draft", "target": "second"},
        {"id": "e-second-publish", "source": "second", "target": "publish"},
    ]
    warned = stitch.http.post("/flows/validate", json={"graph": graph}).json()["warnings"]
    assert [(w["rule"], w["node_id"]) for w in warned] == [("gate_answer_only", "publish")]
    assert "UX gates 'review', 'second'" in warned[0]["message"]
    assert "an edge from each of 'draft', 'notes' to 'publish'" in warned[0]["message"]

    # Fixed as the warning says: no warning, and a node fed by a gate and a Worker gets none either.
    graph["edges"] += [
        {"id": "e-draft-publish", "source": "draft", "target": "publish"},
        {"id": "e-notes-publish", "source": "notes", "target": "publish"},
    ]
    assert stitch.http.post("/flows/validate", json={"graph": graph}).json()["warnings"] == []


@pytest.mark.slow
def test_the_approval_starters_last_worker_receives_the_draft_and_the_answer(
    stitch: StitchServer, worker: Worker
) -> None:
    graph = filled(starters()["approval"]["graph"], worker.url, draft="never")
    run_id = start(stitch, create(stitch, graph, "approval"), {"topic": "spring offer"})
    # The drafting Worker's worker writes a draft of its own and calls back with it.
    sent = wait_until(lambda: [p for p in worker.received if p["nodeId"] == "draft"])[0]
    assert sent["input"] == {"topic": "spring offer"}
    draft = {"draft": "Our spring offer: two for one.", "words": 6}
    done = httpx.post(sent["callbackUrl"], json={"status": "completed", "output": draft}, timeout=30)
    assert done.status_code == 200, done.text
    run = stitch.wait_for(run_id, ("waiting_for_user",))
    assert run["node_states"]["review"]["input"] == draft  # the person is shown the draft
    answer = {"approved": True, "note": "fine"}
    assert stitch.http.post(f"/complete/{run_id}/review", json=answer).status_code == 200
    run = stitch.wait_for(run_id)
    assert run["status"] == "completed", run
    received = next(p for p in worker.received if p["nodeId"] == "publish")["input"]
    assert received == {**draft, **answer}
    assert run["node_states"]["publish"]["input"] == received
