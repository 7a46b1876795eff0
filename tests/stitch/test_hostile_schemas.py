"""Input schemas (a UX gate's ``data.inputSchema``, a flow's ``inputSchema``) and the values
checked against them, written by someone who means harm, through a running ``agentloom stitch
serve`` on SQLite and PostgreSQL: nothing is fetched, nothing runs without bound, every case
gets a 4xx (or a problem from validate) and no traceback, and ``/health`` keeps answering."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from tests.stitch.conftest import StitchServer
from tests.stitch.hostile import (
    assert_clean_log,
    flow_input_graph,
    gate_graph,
    listening,
    messages,
    waiting_gate,
    while_health_is_asked,
)

pytestmark = pytest.mark.slow

EVIL = "^(a+)+$"  # exponential on a backtracking engine
EVIL_TEXT = "a" * 34 + "!"


def chained_one_of(links: int = 26) -> dict:  # type: ignore[type-arg]
    """Each link is a oneOf of two references to the next: 2**links subschemas once expanded."""
    defs = {f"l{i}": {"oneOf": [{"$ref": f"#/$defs/l{i + 1}"}, {"$ref": f"#/$defs/l{i + 1}"}]} for i in range(links)}
    defs[f"l{links}"] = {"type": "string"}
    return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/l0"}}}


# Saves (each reference is followed once, as a recursion is), but doubles the work at every level
# of the value: only the budget at use stops it.
DOUBLING = {
    "type": "object",
    "$defs": {
        "n": {"allOf": [{"$ref": "#/$defs/m"}, {"$ref": "#/$defs/m"}]},
        "m": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}},
    },
    "properties": {"c": {"$ref": "#/$defs/n"}},
}


def nested(depth: int) -> dict:  # type: ignore[type-arg]
    value: dict = {}  # type: ignore[type-arg]
    for _ in range(depth):
        value = {"c": value}
    return value


def refused_at_save_and_named_by_validate(stitch: StitchServer, graph: dict, *words: str) -> None:  # type: ignore[type-arg]
    saved = stitch.http.post("/flows", json={"name": "hostile", "graph": graph})
    assert saved.status_code == 422, saved.text
    assert all(word in messages(saved) for word in words), messages(saved)
    checked = stitch.http.post("/flows/validate", json={"graph": graph})
    assert checked.status_code == 200, checked.text
    problems = checked.json()["problems"]
    assert [p["rule"] for p in problems] == ["input_schema"], problems
    assert all(word in problems[0]["message"] for word in words), problems


def test_no_schema_reaches_the_network(stitch: StitchServer) -> None:
    with listening() as listener:
        here = f"http://127.0.0.1:{listener.port}"
        schemas = [
            {"type": "object", "allOf": [{"$id": f"{here}/a/", "$ref": "b.json"}]},  # relative to a nested $id
            {"type": "object", "properties": {"x": {"$ref": f"{here}/x.json"}}},
            {"$id": f"{here}/root/", "type": "object", "properties": {"x": {"$ref": "other.json"}}},
            {"type": "object", "properties": {"x": {"$dynamicRef": f"{here}/d.json#meta"}}},
            {"type": "object", "properties": {"x": {"$schema": f"{here}/meta.json"}}},
            {"$schema": f"{here}/meta.json", "type": "object"},
            # References into what is not a subschema: an unknown keyword, const, enum.
            {"type": "object", "$ref": "#/x-foo", "x-foo": {"$ref": f"{here}/x.json"}},
            {"type": "object", "$defs": {"c": {"const": {"$ref": f"{here}/c.json"}}}, "$ref": "#/$defs/c/const"},
            {"type": "object", "$defs": {"c": {"enum": [{"pattern": EVIL}]}}, "$ref": "#/$defs/c/enum/0"},
        ]
        for schema in schemas:
            for graph in (gate_graph(schema), flow_input_graph(schema)):
                refused_at_save_and_named_by_validate(stitch, graph)
        allof = stitch.http.post("/flows", json={"name": "x", "graph": gate_graph(schemas[0])})
        assert "/allOf/0" in messages(allof) and "never fetches" in messages(allof)
        assert listener.accepted == 0
    assert_clean_log(stitch)


def test_a_backtracking_pattern_is_answered_at_once_at_a_gate_and_at_run_start(stitch: StitchServer) -> None:
    for schema, wrong, right in [
        ({"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}}, {"x": EVIL_TEXT}, {"x": "aa"}),
        ({"type": "object", "patternProperties": {EVIL: {"type": "number"}}}, {EVIL_TEXT[:-1]: "n"}, {"aaa": 1}),
        ({"type": "object", "propertyNames": {"pattern": EVIL}}, {EVIL_TEXT: 1}, {"a": 1}),
        (
            {"type": "object", "patternProperties": {EVIL: {}}, "additionalProperties": False},
            {EVIL_TEXT: 1},
            {"aaaa": 1},
        ),
    ]:
        run_id = waiting_gate(stitch, schema)
        refused = while_health_is_asked(stitch, lambda c, r=run_id, w=wrong: c.post(f"/complete/{r}/gate", json=w))
        assert refused.reply.status_code == 422, refused.reply.text
        assert stitch.http.get(f"/runs/{run_id}").json()["status"] == "waiting_for_user"
        assert stitch.http.post(f"/complete/{run_id}/gate", json=right).status_code == 200

        flow = stitch.http.post("/flows", json={"name": "input", "graph": flow_input_graph(schema)}).json()
        before = len(stitch.http.get("/runs", params={"flow_id": flow["id"]}).json()["runs"])
        started = stitch.http.post(f"/flows/{flow['id']}/runs", json={"input": wrong})
        assert started.status_code == 422, started.text
        assert len(stitch.http.get("/runs", params={"flow_id": flow["id"]}).json()["runs"]) == before
        assert stitch.http.post(f"/flows/{flow['id']}/runs", json={"input": right}).status_code == 201
    assert_clean_log(stitch)


def test_pattern_work_counts_against_the_budget(stitch: StitchServer) -> None:
    # Linear in the text, but a thousand RE2 instructions a character once its DFA gives up.
    wide = {"type": "object", "properties": {"s": {"type": "string", "pattern": "[ab]*a[ab]{999}c"}}}
    run_id = waiting_gate(stitch, wide)
    text = "ab" * 250_000
    refused = while_health_is_asked(stitch, lambda c: c.post(f"/complete/{run_id}/gate", json={"s": text}))
    assert refused.reply.status_code == 422 and "within its budget" in messages(refused.reply)
    assert stitch.http.post(f"/complete/{run_id}/gate", json={"s": "a" * 1000 + "c"}).status_code == 200
    # Every pattern against every key: each search is a step.
    patterns = {"type": "object", "patternProperties": {f"p{i}": {} for i in range(500)}, "additionalProperties": False}
    run_id = waiting_gate(stitch, patterns)
    keys = {f"k{i}": 1 for i in range(20_000)}
    refused = while_health_is_asked(stitch, lambda c: c.post(f"/complete/{run_id}/gate", json=keys))
    assert refused.reply.status_code == 422 and "within its budget" in messages(refused.reply)
    assert stitch.http.post(f"/complete/{run_id}/gate", json={"p1": 1}).status_code == 200
    assert_clean_log(stitch)


def test_patterns_a_bounded_engine_cannot_run_are_refused_at_save_naming_the_pattern(stitch: StitchServer) -> None:
    for pattern, said in [
        ("^(?=a)b", "lookahead"),
        ("(a)\\1", "backreferences"),
        ("(" * 5000 + ")" * 5000, "at most"),
        ("[", "cannot be used"),
    ]:
        schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
        refused_at_save_and_named_by_validate(stitch, gate_graph(schema), "/properties/x/pattern", said)
    # ECMA-262 escapes that Python's re and RE2 write differently still mean what they meant.
    unicode = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^\\u00e9\\d{2}$"}}}
    run_id = waiting_gate(stitch, unicode)
    assert stitch.http.post(f"/complete/{run_id}/gate", json={"x": "e12"}).status_code == 422
    assert stitch.http.post(f"/complete/{run_id}/gate", json={"x": "é12"}).status_code == 200
    assert_clean_log(stitch)


def test_schemas_of_unbounded_cost_are_refused_at_save(stitch: StitchServer) -> None:
    refused_at_save_and_named_by_validate(stitch, gate_graph(chained_one_of()), "expands to more than")
    at_top = {**chained_one_of(), "allOf": [{"$ref": "#/$defs/l0"}]}
    refused_at_save_and_named_by_validate(stitch, flow_input_graph(at_top), "expands to more than")
    endless = {"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}}
    refused_at_save_and_named_by_validate(stitch, gate_graph(endless), "without end")
    deep: dict = {"type": "string"}  # type: ignore[type-arg]
    for _ in range(40):
        deep = {"not": deep}  # within the JSON nesting a body may have (64), past the schema's (32)
    refused_at_save_and_named_by_validate(stitch, gate_graph({"type": "object", "properties": {"x": deep}}), "deep")
    huge = {"type": "object", "properties": {f"f{i}": {"type": "string", "description": "x" * 100} for i in range(800)}}
    refused_at_save_and_named_by_validate(stitch, gate_graph(huge), "bytes as JSON")
    # Each within its own limit, but five of them (60 KB each) pass what one flow may hold in all.
    large = {"type": "object", "properties": {f"f{i}": {"type": "string", "description": "x" * 80} for i in range(500)}}
    many = {"nodes": [{**gate_graph(large)["nodes"][0], "id": f"gate{i}"} for i in range(5)]}
    saved = stitch.http.post("/flows", json={"name": "many", "graph": many})
    assert saved.status_code == 422 and "bytes of JSON in all" in messages(saved), saved.text[:300]
    assert stitch.http.post("/flows", json={"name": "four", "graph": {"nodes": many["nodes"][:4]}}).status_code == 201
    # Small schemas, each within its own limits, that multiply: what a flow's may cost is added up.
    doubling = chained_one_of(11)  # 2**11 subschemas once expanded: allowed alone
    gates = {"nodes": [{**gate_graph(doubling)["nodes"][0], "id": f"gate{i}"} for i in range(30)]}
    saved = stitch.http.post("/flows", json={"name": "gates", "graph": gates})
    assert saved.status_code == 422 and "in all" in messages(saved), saved.text[:300]
    assert stitch.http.post("/flows", json={"name": "one", "graph": gate_graph(doubling)}).status_code == 201
    assert_clean_log(stitch)


def test_a_value_past_the_budget_is_refused_and_the_gate_keeps_waiting(stitch: StitchServer) -> None:
    run_id = waiting_gate(stitch, DOUBLING)
    costly = while_health_is_asked(stitch, lambda c: c.post(f"/complete/{run_id}/gate", json=nested(40)))
    assert costly.reply.status_code == 422, costly.reply.text
    assert "within its budget" in messages(costly.reply)
    # The check took its whole budget; the server answered others all the while.
    assert costly.statuses and set(costly.statuses) == {200}
    assert stitch.http.get(f"/runs/{run_id}").json()["status"] == "waiting_for_user"
    assert stitch.http.post(f"/complete/{run_id}/gate", json=nested(3)).status_code == 200

    flow = stitch.http.post("/flows", json={"name": "input", "graph": flow_input_graph(DOUBLING)}).json()
    started = while_health_is_asked(stitch, lambda c: c.post(f"/flows/{flow['id']}/runs", json={"input": nested(40)}))
    assert started.reply.status_code == 422 and started.statuses, started.reply.text
    assert stitch.http.get("/runs", params={"flow_id": flow["id"]}).json()["runs"] == []
    assert_clean_log(stitch)


def test_unique_items_and_multiple_of_hold_for_any_value(stitch: StitchServer) -> None:
    unique = {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}}
    run_id = waiting_gate(stitch, unique)
    many = [{"a": i} for i in range(60_000)]  # quadratic for jsonschema's own uniqueItems
    twice = stitch.http.post(f"/complete/{run_id}/gate", json={"x": [*many, {"a": 7.0}]})  # 7 == 7.0 in JSON
    assert twice.status_code == 422 and "non-unique" in messages(twice), twice.text
    assert stitch.http.post(f"/complete/{run_id}/gate", json={"x": many}).status_code == 200

    halves = {"type": "object", "properties": {"n": {"multipleOf": 0.5}, "m": {"multipleOf": 0.3}}}
    run_id = waiting_gate(stitch, halves)
    body = '{"n": 1' + "0" * 400 + ', "m": 1' + "0" * 400 + "}"  # 10**400: legal JSON, beyond a float
    odd = stitch.http.post(f"/complete/{run_id}/gate", content=body, headers={"Content-Type": "application/json"})
    assert odd.status_code == 422 and "m: " in messages(odd) and "not a multiple of 0.3" in messages(odd), odd.text
    assert "n: " not in messages(odd)  # 10**400 is a multiple of 0.5
    flow = stitch.http.post("/flows", json={"name": "input", "graph": flow_input_graph(halves)}).json()
    started = stitch.http.post(
        f"/flows/{flow['id']}/runs",
        content='{"input": {"n": 1' + "0" * 400 + "}}",
        headers={"Content-Type": "application/json"},
    )
    assert started.status_code == 201, started.text
    assert_clean_log(stitch)


def test_clients_that_give_up_stop_their_checks(stitch: StitchServer) -> None:
    run_id = waiting_gate(stitch, DOUBLING)
    leaving = 12

    def give_up() -> None:
        with httpx.Client(base_url=stitch.base + "/api/stitch", timeout=0.3) as client:
            try:
                client.post(f"/complete/{run_id}/gate", json=nested(40))
            except httpx.TimeoutException:
                pass  # the client leaves: its connection closes

    threads = [threading.Thread(target=give_up) for _ in range(leaving)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Each check stops once its client is gone, and says so; none runs to its budget's end unheard.
    deadline = time.monotonic() + 60
    while stitch.log.read_text().count("its client left during an input schema check") < leaving:
        assert time.monotonic() < deadline, stitch.log.read_text()[-3000:]
        assert stitch.http.get("/health").status_code == 200
        time.sleep(0.05)
    assert stitch.http.get(f"/runs/{run_id}").json()["status"] == "waiting_for_user"
    assert stitch.http.post(f"/complete/{run_id}/gate", json=nested(2)).status_code == 200
    assert_clean_log(stitch)
