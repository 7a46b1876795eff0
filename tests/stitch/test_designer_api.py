"""The designer's API (issue 41) end to end on SQLite and PostgreSQL: a graph checked without
saving it (every problem at its node, edge and field, by the rules saving applies), the flow's
versions and what changed between two, input schemas for a run's input and a gate's answer,
and a React Flow graph that comes back key for key."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, insert, inspect, select, text

from agentloom.core.timestamps import iso
from agentloom.stitch import input_schemas, versions
from agentloom.stitch.db import Database, normalise_url, schema
from agentloom.stitch.db.migrations import STEPS
from agentloom.stitch.flows import Flows
from tests.conftest import TIMESTAMP
from tests.stitch.conftest import StitchServer
from tests.stitch.test_api import create, start, wait_until

W = "http://127.0.0.1:9/work"


def worker(node_id: str, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "Worker", "position": {"x": 0, "y": 0}, "data": {"webhookUrl": W, **data}}


def node(node_id: str, type_: str, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "type": type_, "position": {"x": 0, "y": 0}, "data": data}


def edge(edge_id: str, source: str, target: str) -> dict[str, Any]:
    return {"id": edge_id, "source": source, "target": target}


def places(problems: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None, str | None]]:
    return [(p["rule"], p["node_id"], p["edge_id"], p["field"]) for p in problems]


def canonical(value: Any) -> str:
    """JSON with its keys sorted: equal only when every value is, number types included (1 is not 1.0)."""
    return json.dumps(value, sort_keys=True)


APPROVAL_SCHEMA = {
    "type": "object",
    "title": "Approve the payment",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve?", "x-stitch-action": True},
        "amount": {"type": "number", "minimum": 0, "description": "The amount to pay, in euros."},
        "reason": {"type": "string", "default": ""},
    },
    "required": ["approved", "amount"],
}

BROKEN_DRAFT = {
    "nodes": [
        {"id": "fetch", "type": "Worker", "position": {"x": 0, "y": 0}, "data": {"webhookUrl": ""}},
        node("a", "UX"),
        node("b", "UX"),
        node("ask", "UX", inputSchema={"type": "object", "properties": {"n": {"type": "numbr"}}}),
        {"id": "robot", "type": "Robot", "position": {"x": 0, "y": 0}},
        node("lone", "UX"),
    ],
    "edges": [edge("e1", "fetch", "nowhere"), edge("e2", "a", "b"), edge("e3", "b", "a"), edge("e4", "fetch", "ask")],
    "inputSchema": {"type": "array"},
}
EXPECTED_PLACES = [
    ("node_type", "robot", None, "type"),
    ("worker_webhook", "fetch", None, "webhookUrl"),
    ("input_schema", "ask", None, "inputSchema"),
    ("input_schema", None, None, "inputSchema"),
    ("dangling_edge", None, "e1", "target"),
    ("cycle", "a", None, None),
]


@pytest.mark.slow
def test_validate_places_every_problem_and_saving_refuses_by_the_same_rules(stitch: StitchServer) -> None:
    checked = stitch.http.post("/flows/validate", json={"graph": BROKEN_DRAFT})
    assert checked.status_code == 200, checked.text
    reply = checked.json()
    assert reply["valid"] is False and reply["warnings"] == []
    assert places(reply["problems"]) == EXPECTED_PLACES
    messages = {p["rule"] + ":" + str(p["node_id"]): p["message"] for p in reply["problems"]}
    assert messages["node_type:robot"].startswith(
        "node 'robot': type must be 'Worker', 'UX', 'Splitter' or 'Collector'"
    )
    assert "needs data.webhookUrl, the http(s) URL of its worker (got '')" in messages["worker_webhook:fetch"]
    assert "'numbr'" in messages["input_schema:ask"] and "properties.n.type" in messages["input_schema:ask"]
    assert 'must describe an object: set "type": "object"' in messages["input_schema:None"]
    assert stitch.http.post("/flows/validate", json=BROKEN_DRAFT).json() == reply  # the bare graph: the same

    saved = stitch.http.post("/flows", json={"name": "draft", "graph": BROKEN_DRAFT})
    assert saved.status_code == 422, saved.text
    detail = saved.json()["detail"]
    assert [(d["rule"], d.get("node_id"), d.get("edge_id"), d.get("field")) for d in detail] == EXPECTED_PLACES
    assert [d["msg"] for d in detail] == [p["message"] for p in reply["problems"]]
    assert all(d["type"] == "graph" and d["loc"][:2] == ["body", "graph"] for d in detail)
    assert detail[0]["loc"] == ["body", "graph", "nodes", 4, "type"]  # a value's problem: its JSON path
    assert detail[4] == {
        "loc": ["body", "graph"],
        "msg": "edge 'e1' points to missing node 'nowhere' (dangling edge); connect it to a node of the flow, "
        "or delete it",
        "type": "graph",
        "rule": "dangling_edge",
        "edge_id": "e1",
        "field": "target",
    }
    assert stitch.http.get("/flows").json() == []

    good = {
        "nodes": [node("s", "Splitter", arrayPath="items"), worker("w"), node("lone", "UX")],
        "edges": [edge("e1", "s", "w")],
    }
    checked = stitch.http.post("/flows/validate", json={"graph": good}).json()
    assert checked["valid"] is True and checked["problems"] == []
    assert places(checked["warnings"]) == [
        ("splitter_without_collector", "s", None, None),
        ("unconnected_node", "lone", None, None),
    ]
    flow_id = create(stitch, good)  # warnings do not keep a graph from being saved
    refused = stitch.http.put(f"/flows/{flow_id}", json={"graph": BROKEN_DRAFT})
    assert refused.status_code == 422 and [d["rule"] for d in refused.json()["detail"]] == [
        rule for rule, *_ in EXPECTED_PLACES
    ]
    assert stitch.http.get(f"/flows/{flow_id}").json()["version"] == 1

    # Any graph that is JSON is answered; a body that holds no graph is a 422 naming what to send.
    assert places(stitch.http.post("/flows/validate", json={"graph": 5}).json()["problems"]) == [
        ("graph", None, None, None)
    ]
    assert places(stitch.http.post("/flows/validate", json={"nodes": []}).json()["problems"]) == [
        ("nodes_empty", None, None, "nodes")
    ]
    for body, where in (([1], ["body"]), ({"edges": []}, ["body"]), ({"graph": good, "name": "x"}, ["body", "name"])):
        response = stitch.http.post("/flows/validate", json=body)
        assert response.status_code == 422 and response.json()["detail"][0]["loc"] == where, response.text
    assert stitch.http.post("/flows/validate", params={"strict": "1"}, json=good).status_code == 422
    # Its own resource: a 405 there names POST alone, not the methods of /flows/{flow_id} beside it.
    assert stitch.http.request("OPTIONS", "/flows/validate").headers["allow"] == "POST"
    assert stitch.http.request("OPTIONS", f"/flows/{flow_id}").headers["allow"] == "DELETE, GET, PUT"


@pytest.mark.slow
def test_validate_needs_the_api_key_like_every_endpoint(database_url: str, tmp_path: Path) -> None:
    server = StitchServer(database_url, tmp_path, api_key="k" * 24).start()
    try:
        graph = {"nodes": [node("u", "UX")]}
        stranger = httpx.post(f"{server.base}/api/stitch/flows/validate", json=graph)
        assert stranger.status_code == 401
        assert server.http.post("/flows/validate", json=graph).json()["valid"] is True
        spec = server.http.get(f"{server.base}/openapi.json").json()
        operation = spec["paths"]["/api/stitch/flows/validate"]["post"]
        assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/GraphCheck"
        }
        assert "401" in operation["responses"]
    finally:
        server.stop()


@pytest.mark.slow
def test_versions_are_kept_listed_read_and_compared(stitch: StitchServer) -> None:
    first = {
        "nodes": [node("gate", "UX", prompt="Go?"), worker("w"), node("old", "UX")],
        "edges": [edge("e1", "gate", "w"), edge("e2", "w", "old")],
    }
    created = stitch.http.post("/flows", json={"name": "pay", "graph": first, "author": "ana@example.com"})
    assert created.status_code == 201 and created.json()["version"] == 1
    flow_id = created.json()["id"]
    run_1 = start(stitch, flow_id)

    second = copy.deepcopy(first)
    second["nodes"][0]["position"] = {"x": 40, "y": 10}  # moved only
    second["nodes"][1]["data"]["webhookUrl"] = "http://127.0.0.1:9/other"  # changed
    second["nodes"] = [n for n in second["nodes"] if n["id"] != "old"] + [node("new", "UX")]
    second["edges"] = [edge("e1", "gate", "w"), {**edge("e3", "w", "new"), "label": "then"}]
    updated = stitch.http.put(f"/flows/{flow_id}", json={"graph": second, "author": "ben"})
    assert updated.status_code == 200 and updated.json()["version"] == 2
    run_2 = start(stitch, flow_id)
    assert stitch.http.put(f"/flows/{flow_id}", json={"name": "pay out"}).json()["version"] == 3
    unchanged = stitch.http.put(f"/flows/{flow_id}", json={"name": "pay out", "graph": second, "author": "cy"})
    assert unchanged.json()["version"] == 3  # neither the name nor the graph changed: no version
    bad = stitch.http.put(f"/flows/{flow_id}", json={"name": "broken", "graph": {"nodes": [node("x", "Robot")]}})
    assert bad.status_code == 422  # refused: nothing kept either

    listed = stitch.http.get(f"/flows/{flow_id}/versions").json()
    assert [(v["version"], v["name"], v["author"], v["node_count"], v["edge_count"]) for v in listed] == [
        (3, "pay out", None, 3, 2),
        (2, "pay", "ben", 3, 2),
        (1, "pay", "ana@example.com", 3, 2),
    ]
    assert all(TIMESTAMP.fullmatch(v["created_at"]) for v in listed)
    one = stitch.http.get(f"/flows/{flow_id}/versions/1").json()
    assert one == {
        "flow_id": flow_id,
        "version": 1,
        "name": "pay",
        "author": "ana@example.com",
        "created_at": listed[2]["created_at"],
        "graph": first,
    }
    assert stitch.http.get(f"/flows/{flow_id}/versions/2").json()["graph"] == second
    missing = stitch.http.get(f"/flows/{flow_id}/versions/9")
    assert missing.status_code == 404
    assert missing.json()["detail"] == f"flow {flow_id} has no version 9; its versions are 1 to 3"

    diff = stitch.http.get(f"/flows/{flow_id}/diff", params={"from": 1, "to": 2})
    assert diff.status_code == 200, diff.text
    assert diff.json() == {
        "from": 1,
        "to": 2,
        "nodes": {
            "added": ["new"],
            "removed": ["old"],
            "changed": [{"id": "w", "fields": ["data.webhookUrl"]}],
            "moved": ["gate"],
        },
        "edges": {"added": ["e3"], "removed": ["e2"], "changed": []},
        "graph": [],
        "name": [],
    }
    renamed = stitch.http.get(f"/flows/{flow_id}/diff", params={"from": 2, "to": 3}).json()
    assert renamed["name"] == ["pay", "pay out"]
    backwards = stitch.http.get(f"/flows/{flow_id}/diff", params={"from": 2, "to": 1}).json()
    assert backwards["nodes"]["added"] == ["old"] and backwards["edges"]["removed"] == ["e3"]
    assert stitch.http.get(f"/flows/{flow_id}/diff", params={"from": 2, "to": 3}).json()["nodes"]["changed"] == []
    for params in ({"from": "x", "to": 2}, {"from": 0, "to": 2}, {"from": 1}, {"from": 1, "to": 2, "too": 3}):
        assert stitch.http.get(f"/flows/{flow_id}/diff", params=params).status_code == 422, params
    assert stitch.http.get(f"/flows/{flow_id}/diff", params={"from": 1, "to": 7}).status_code == 404
    assert stitch.http.get(f"/flows/{flow_id}/versions/0").status_code == 422

    # A run keeps the version it started on.
    assert stitch.http.get(f"/runs/{run_1}").json()["flow_version"] == 1
    assert stitch.http.get(f"/runs/{run_2}").json()["flow_version"] == 2

    stitch.http.delete(f"/flows/{flow_id}", params={"force": "true"})
    for path in ("versions", "versions/1", "diff?from=1&to=2"):
        gone = stitch.http.get(f"/flows/{flow_id}/{path}")
        assert gone.status_code == 404 and gone.json()["detail"] == f"no flow {flow_id}", path
    assert stitch.http.get("/flows/not-a-flow/versions").status_code == 404


def test_schema_step_6_keeps_the_current_version_of_each_flow(database_url: str) -> None:
    """A database made at step 5, with flows on it, is upgraded: each flow's current version is kept."""
    raw = create_engine(normalise_url(database_url))
    with raw.begin() as conn:
        schema.metadata.create_all(
            conn, tables=[t for t in schema.metadata.sorted_tables if t.name != "stitch_flow_versions"]
        )
        conn.execute(text("CREATE TABLE stitch_schema_version (version INTEGER NOT NULL)"))
        for version in range(1, 6):
            conn.execute(text("INSERT INTO stitch_schema_version (version) VALUES (:v)"), {"v": version})
        conn.execute(insert(schema.settings).values(key="callback_secret", value="s" * 64))
        graph = {"nodes": [node("gate", "UX")], "viewport": {"x": 1.5, "y": 0, "zoom": 1}}
        conn.execute(
            insert(schema.flows),
            [
                {
                    "id": "11111111-1111-1111-1111-111111111111",
                    "name": "edited",
                    "graph": graph,
                    "version": 4,
                    "created_at": datetime(2026, 1, 1, tzinfo=UTC),
                    "updated_at": datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC),
                },
                {
                    "id": "22222222-2222-2222-2222-222222222222",
                    "name": "new",
                    "graph": graph,
                    "version": 1,
                    "created_at": datetime(2026, 3, 1, tzinfo=UTC),
                    "updated_at": datetime(2026, 3, 1, tzinfo=UTC),
                },
            ],
        )
    raw.dispose()

    db = Database(database_url)
    try:
        assert db.version == STEPS[-1][0] == 6
        with db.reading() as conn:
            assert "stitch_flow_versions" in inspect(conn).get_table_names()
            kept = conn.execute(select(schema.flow_versions).order_by(schema.flow_versions.c.flow_id)).mappings().all()
        assert [(k["flow_id"][:8], k["version"], k["name"], k["author"], k["graph"]) for k in kept] == [
            ("11111111", 4, "edited", None, graph),
            ("22222222", 1, "new", None, graph),
        ]
        flows = Flows(db)
        listed = flows.versions("11111111-1111-1111-1111-111111111111")
        assert [(v["version"], v["node_count"], v["edge_count"]) for v in listed] == [(4, 1, 0)]
        assert iso(listed[0]["created_at"]) == "2026-02-03T04:05:06.000Z"  # when that version was made
        flows.update("11111111-1111-1111-1111-111111111111", "edited again", None, author="dee")
        assert [v["version"] for v in flows.versions("11111111-1111-1111-1111-111111111111")] == [5, 4]
        with pytest.raises(LookupError, match="has no version 2; its versions are 4 to 5"):
            flows.version("11111111-1111-1111-1111-111111111111", 2)
    finally:
        db.dispose()
    again = Database(database_url)  # a second start copies nothing twice
    try:
        with again.reading() as conn:
            assert conn.execute(select(schema.flow_versions.c.version)).scalars().all().count(4) == 1
    finally:
        again.dispose()


@pytest.mark.slow
def test_a_run_input_must_fit_the_flow_s_input_schema(stitch: StitchServer) -> None:
    graph = {
        "nodes": [node("gate", "UX")],
        "inputSchema": {
            "type": "object",
            "properties": {"amount": {"type": "number"}, "items": {"type": "array", "items": {"type": "integer"}}},
            "required": ["amount"],
        },
    }
    flow_id = create(stitch, graph)
    refused = stitch.http.post(f"/flows/{flow_id}/runs", json={"input": {"amount": "abc", "items": [1, "x"]}})
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"] == [
        {"loc": ["body", "input", "amount"], "msg": "amount: 'abc' is not of type 'number'", "type": "input_schema"},
        {"loc": ["body", "input", "items", 1], "msg": "items.1: 'x' is not of type 'integer'", "type": "input_schema"},
    ]
    missing = stitch.http.post(f"/flows/{flow_id}/runs", json={"input": {}})
    assert missing.json()["detail"] == [
        {
            "loc": ["body", "input", "amount"],
            "msg": "amount: missing; this field is required, add it",
            "type": "input_schema",
        }
    ]
    assert stitch.http.post(f"/flows/{flow_id}/runs", json={}).json()["detail"][0]["msg"] == (
        "input: None is not of type 'object'"
    )
    assert stitch.http.get("/runs", params={"flow_id": flow_id}).json()["runs"] == []  # nothing started
    run_id = start(stitch, flow_id, {"amount": 12.5})
    assert stitch.wait_for(run_id, ("waiting_for_user",))["input"] == {"amount": 12.5}


@pytest.mark.slow
def test_a_gate_s_answer_must_fit_its_input_schema(stitch: StitchServer) -> None:
    graph = {
        "nodes": [node("approve", "UX", prompt="Pay it?", inputSchema=APPROVAL_SCHEMA), node("then", "UX")],
        "edges": [edge("e1", "approve", "then")],
    }
    flow_id = create(stitch, graph)
    run_id = start(stitch, flow_id)
    stitch.wait_for(run_id, ("waiting_for_user",))
    (gate,) = stitch.http.get("/runs/waiting", params={"flow_id": flow_id}).json()
    assert (gate["node_id"], gate["prompt"], gate["input_schema"]) == ("approve", "Pay it?", APPROVAL_SCHEMA)

    # The flow's next version asks for something else: the run keeps the schema it started with.
    changed = copy.deepcopy(graph)
    changed["nodes"][0]["data"]["inputSchema"] = {"type": "object", "required": ["other"]}
    assert stitch.http.put(f"/flows/{flow_id}", json={"graph": changed}).status_code == 200

    wrong = stitch.http.post(f"/complete/{run_id}/approve", json={"approved": True, "amount": "abc"})
    assert wrong.status_code == 422, wrong.text
    assert wrong.json()["detail"] == [
        {"loc": ["body", "amount"], "msg": "amount: 'abc' is not of type 'number'", "type": "input_schema"}
    ]
    empty = stitch.http.post(f"/complete/{run_id}/approve", json={}).json()["detail"]
    assert [(d["loc"], d["msg"]) for d in empty] == [
        (["body", "approved"], "approved: missing; this field is required, add it"),  # in the schema's order
        (["body", "amount"], "amount: missing; this field is required, add it"),
    ]
    assert stitch.http.post(f"/complete/{run_id}/approve", json=[1]).json()["detail"][0]["msg"] == (
        "output: [1] is not of type 'object'"
    )
    run = stitch.http.get(f"/runs/{run_id}").json()
    assert run["status"] == "waiting_for_user" and run["node_states"]["approve"]["status"] == "waiting_for_user"
    assert [e["node_key"] for e in stitch.http.get(f"/runs/{run_id}/events").json()] == ["approve"]  # nothing new

    done = stitch.http.post(f"/complete/{run_id}/approve", json={"approved": True, "amount": 40})
    assert done.status_code == 200, done.text
    run = wait_until(
        lambda: stitch.wait_for(run_id, ("waiting_for_user",)) if waiting_at(stitch, run_id, "then") else None
    )
    assert run["node_states"]["approve"]["output"] == {"approved": True, "amount": 40}
    (gate,) = stitch.http.get("/runs/waiting", params={"flow_id": flow_id}).json()
    assert (gate["node_id"], gate["input_schema"]) == ("then", None)  # no schema: anything goes
    assert stitch.http.post(f"/complete/{run_id}/then", json="anything").status_code == 200


def waiting_at(stitch: StitchServer, run_id: str, node_id: str) -> bool:
    return bool(stitch.http.get(f"/runs/{run_id}").json()["node_states"][node_id]["status"] == "waiting_for_user")


REACT_FLOW_EXPORT: dict[str, Any] = {
    "nodes": [
        {
            "id": "fetch",
            "type": "Worker",
            "position": {"x": 100, "y": 50.5},
            "data": {"webhookUrl": W, "label": "Fetch", "icon": None, "color": "#ff0072", "retries": 0},
            "width": 150,
            "height": 40.0,
            "measured": {"width": 150, "height": 40},
            "selected": False,
            "dragging": False,
            "style": {"border": "1px solid #777", "padding": 10},
            "className": "worker",
            "sourcePosition": "right",
            "targetPosition": "left",
            "positionAbsolute": {"x": 100, "y": 50.5},
        },
        {
            "id": "approve",
            "type": "UX",
            "position": {"x": 0.0, "y": -20},
            "data": {"prompt": "Publish?", "inputSchema": APPROVAL_SCHEMA},
            "parentId": "fetch",
            "extent": "parent",
            "hidden": False,
            "zIndex": 3,
        },
    ],
    "edges": [
        {
            "id": "xy-edge__fetch-approve",
            "source": "fetch",
            "target": "approve",
            "sourceHandle": None,
            "targetHandle": "in",
            "animated": True,
            "label": "then",
            "markerEnd": {"type": "arrowclosed", "width": 20},
            "style": {"stroke": "#b1b1b7", "strokeWidth": 2.5},
            "type": "smoothstep",
            "data": {"note": None, "weight": 1.0},
        }
    ],
    "viewport": {"x": -12.25, "y": 0, "zoom": 1.5},
}


@pytest.mark.slow
def test_a_react_flow_graph_comes_back_key_for_key(stitch: StitchServer) -> None:
    sent = copy.deepcopy(REACT_FLOW_EXPORT)
    assert stitch.http.post("/flows/validate", json=sent).json() == {"valid": True, "problems": [], "warnings": []}
    flow_id = create(stitch, sent)
    assert sent == REACT_FLOW_EXPORT
    for path in (f"/flows/{flow_id}", f"/flows/{flow_id}/versions/1"):
        assert canonical(stitch.http.get(path).json()["graph"]) == canonical(REACT_FLOW_EXPORT), path
    run_id = start(stitch, flow_id)
    assert canonical(stitch.http.get(f"/runs/{run_id}").json()["graph"]) == canonical(REACT_FLOW_EXPORT)
    moved = copy.deepcopy(REACT_FLOW_EXPORT)
    moved["nodes"][0]["position"] = {"x": 7, "y": 8.0}
    assert stitch.http.put(f"/flows/{flow_id}", json={"graph": moved}).json()["version"] == 2
    assert canonical(stitch.http.get(f"/flows/{flow_id}/versions/2").json()["graph"]) == canonical(moved)
    listed = stitch.http.get("/flows").json()[0]
    assert canonical(listed["graph"]) == canonical(moved) and listed["node_count"] == 2


# -- the parts on their own ----------------------------------------------------------------------


def test_a_diff_compares_json_as_json() -> None:
    before = {"nodes": [node("a", "UX", n=1, flag=True), node("b", "UX")], "edges": [edge("e", "a", "b")]}
    after = copy.deepcopy(before)
    after["nodes"][0]["data"] = {"n": 1.0, "flag": 1, "new": None}  # 1 and 1.0 are one number; true is not 1
    after["nodes"][1]["width"] = 10
    after["nodes"][1]["positionAbsolute"] = {"x": 1, "y": 2}
    after["edges"][0]["label"] = "x"
    assert versions.diff(before, after) == {
        "nodes": {
            "added": [],
            "removed": [],
            "changed": [{"id": "a", "fields": ["data.flag", "data.new"]}, {"id": "b", "fields": ["width"]}],
            "moved": ["b"],
        },
        "edges": {"added": [], "removed": [], "changed": [{"id": "e", "fields": ["label"]}]},
        "graph": [],
    }
    assert versions.diff({}, {"nodes": "x"})["nodes"]["added"] == []
    schema = {"type": "object", "properties": {"n": {"type": "number"}}}
    assert versions.diff(before, {**before, "inputSchema": schema, "viewport": {"x": 0, "y": 0, "zoom": 1}})[
        "graph"
    ] == ["inputSchema", "viewport"]


def test_input_schemas_are_checked_and_explained() -> None:
    assert input_schemas.schema_problem(APPROVAL_SCHEMA) is None
    assert "must be a JSON Schema object" in str(input_schemas.schema_problem([]))
    assert "not a valid JSON Schema" in str(input_schemas.schema_problem({"type": "object", "required": "a"}))
    assert '"type": "object"' in str(input_schemas.schema_problem({"properties": {}}))
    local = {"type": "object", "$defs": {"n": {"type": "number"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    assert input_schemas.schema_problem(local) is None
    for ref in ("#/$defs/missing", "https://example.com/schema.json", "http://[::1"):
        remote = {"type": "object", "properties": {"a": {"$ref": ref}}}
        assert "does not resolve inside the schema" in str(input_schemas.schema_problem(remote)), ref
    for endless in ({"type": "object", "$ref": "#"}, {"type": "object", "allOf": [{"$ref": "#"}]}):
        assert "refers to itself without end" in str(input_schemas.schema_problem(endless))
    # A loop only some values reach is refused when it is reached, not a server error.
    sometimes = {"type": "object", "if": {"required": ["a"]}, "then": {"$ref": "#"}}
    assert input_schemas.schema_problem(sometimes) is None
    (looped,) = input_schemas.violations(sometimes, {"a": 1}, "output")
    assert looped.message.startswith("output: cannot be checked: the input schema refers to itself without end")
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    assert input_schemas.violations(tree, {"kids": [{"kids": [5]}]}, "output") == [
        input_schemas.Violation(("kids", 0, "kids", 0), "kids.0.kids.0: 5 is not of type 'object'")
    ]
    assert input_schemas.usable({"type": "array"}) is None and input_schemas.usable(local) == local
    found = input_schemas.violations(local, {"a": "x"}, "output")
    assert found == [input_schemas.Violation(("a",), "a: 'x' is not of type 'number'")]
    many = input_schemas.violations(
        {"type": "object", "additionalProperties": False}, {str(i): i for i in range(30)}, "x"
    )
    assert len(many) == 1 and many[0].message.startswith("x: Additional properties are not allowed")
