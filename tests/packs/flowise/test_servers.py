"""The test servers themselves: the fake Flowise against its contract, and against a real Flowise 3.1.2.

The fake's answers come from a real 3.1.2 server (``live-3.1.2``: catalog, templates, create, validation
and error answers); the live tests check that it still answers like one, validation included.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.packs.flowise.fake_flowise import FLOWISE_DATA, LIVE_DATA, TEMPLATES, FakeFlowise
from tests.packs.flowise.fake_validation import UNDEFINED, JSError, v8_json_error, validate_flow_data

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
UUID_ANY = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def load(name: str) -> Any:
    return json.loads((LIVE_DATA / name).read_text(encoding="utf-8"))


def minimal_flow() -> dict[str, Any]:
    return json.loads((FLOWISE_DATA / "minimal-flowdata.json").read_text(encoding="utf-8"))


def api(url: str, api_key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=60)


@pytest.fixture
def client(fake_flowise: FakeFlowise) -> Iterator[httpx.Client]:
    with api(fake_flowise.url, fake_flowise.api_key) as c:
        yield c


def create_body(flow: dict[str, Any] | str, name: str = "agentloom test flow", **extra: Any) -> dict[str, Any]:
    flow_data = flow if isinstance(flow, str) else json.dumps(flow)
    return {"name": name, "flowData": flow_data, "type": "CHATFLOW", "deployed": False, "isPublic": False, **extra}


# --- the fake against its contract -------------------------------------------------------------------


def test_open_endpoints_and_api_key(fake_flowise: FakeFlowise, client: httpx.Client) -> None:
    with api(fake_flowise.url, None) as anonymous:
        ping = anonymous.get("/ping")
        assert (ping.status_code, ping.text) == (200, "pong")
        assert ping.headers["content-type"].startswith("text/html")
        assert anonymous.get("/version").json() == {"version": "3.1.2"}
        for path in ("/nodes", "/nodes/chatOpenAI", "/chatflows", "/marketplaces/templates", "/nodes-list"):
            reply = anonymous.get(path)
            assert reply.status_code == 401, path
            assert reply.json() == {"error": "Unauthorized Access"}  # Flowise's own 401 body
    with api(fake_flowise.url, "not-the-key") as wrong:
        assert wrong.get("/nodes").status_code == 401
    assert httpx.get(f"{fake_flowise.url}/API/V1/nodes").status_code == 401  # wrong case is never let through
    assert client.get("/nodes").status_code == 200


def test_catalog_is_the_live_one_and_mutable(fake_flowise: FakeFlowise, client: httpx.Client) -> None:
    catalog = client.get("/nodes").json()
    assert catalog == load("nodes.json") and len(catalog) == 297
    assert client.get("/nodes/chatOpenAI").json() == load("node_chatOpenAI.json")
    unknown = client.get("/nodes/noSuchNode")
    assert unknown.status_code == 500  # not 404, like Flowise
    assert unknown.json()["message"] == "Error: nodesService.getAllNodes - Node noSuchNode not found"

    fake_flowise.node("chatOpenAI")["version"] = 9.0
    fake_flowise.node("bufferMemory").update(badge="DEPRECATING", description="old")
    fake_flowise.nodes.remove(fake_flowise.node("llmChain"))
    fake_flowise.nodes.append({**load("node_llmChain.json"), "name": "myChain", "label": "My Chain"})
    by_name = {n["name"]: n for n in client.get("/nodes").json()}
    assert by_name["chatOpenAI"]["version"] == 9.0
    assert (by_name["bufferMemory"]["badge"], by_name["bufferMemory"]["description"]) == ("DEPRECATING", "old")
    assert "llmChain" not in by_name and by_name["myChain"]["label"] == "My Chain"
    assert client.get("/nodes/llmChain").status_code == 500
    assert client.get("/nodes/myChain").status_code == 200


def test_nodes_list_answers_the_ui_page(client: httpx.Client) -> None:
    reply = client.get("/nodes-list")  # no such route: Flowise answers its UI's page, 200
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/html")
    assert "<title>Flowise" in reply.text


def test_templates(fake_flowise: FakeFlowise, client: httpx.Client) -> None:
    first, second = client.get("/marketplaces/templates").json(), client.get("/marketplaces/templates").json()
    recorded = load("marketplaces_templates.json")
    assert len(first) == len(recorded) == 50
    assert [{k: v for k, v in t.items() if k != "id"} for t in first] == [
        {k: v for k, v in t.items() if k != "id"} for t in recorded
    ]
    assert all(UUID4.match(t["id"]) for t in first)
    assert first[0]["id"] != second[0]["id"]  # Flowise makes new ids on every call
    chatflows = [t for t in first if t["type"] == "Chatflow"]
    assert len(chatflows) == 24 and all(isinstance(t["flowData"], str) for t in chatflows)

    fake_flowise.permissions = {"chatflows:view"}
    denied = client.get("/marketplaces/templates")
    assert (denied.status_code, denied.json()) == (403, load("error_forbidden_post.json"))


def test_chatflow_round_trip(client: httpx.Client) -> None:
    flow_data = json.dumps(minimal_flow())
    created = client.post("/chatflows", json=create_body(flow_data))
    assert created.status_code == 200  # not 201
    record = created.json()
    assert set(record) == set(load("chatflow_create_response.json"))
    assert UUID4.match(record["id"]) and DATE.fullmatch(record["createdDate"])
    assert (record["flowData"], record["type"], record["deployed"], record["isPublic"]) == (
        flow_data,
        "CHATFLOW",
        False,
        False,
    )
    flow_id = record["id"]

    fetched = client.get(f"/chatflows/{flow_id}").json()
    assert fetched == record and list(fetched)[0] == "id"
    assert [f["id"] for f in client.get("/chatflows", params={"type": "CHATFLOW"}).json()] == [flow_id]
    assert client.get("/chatflows", params={"type": "AGENTFLOW"}).json() == []

    updated = client.put(f"/chatflows/{flow_id}", json={"name": "renamed", "id": str(uuid.uuid4())})
    assert updated.status_code == 200
    assert (updated.json()["id"], updated.json()["name"], updated.json()["flowData"]) == (flow_id, "renamed", flow_data)
    assert client.get(f"/chatflows/{flow_id}").json()["name"] == "renamed"

    deleted = client.delete(f"/chatflows/{flow_id}")
    assert (deleted.status_code, deleted.json()) == (200, {"raw": [], "affected": 1})
    gone = client.get(f"/chatflows/{flow_id}")
    recorded = load("error_get_deleted_chatflow.json")
    assert (gone.status_code, gone.json()) == (
        404,
        {**recorded, "message": recorded["message"].replace("b7fab021-803e-45b4-b5cd-647b7177d37c", flow_id)},
    )
    again = client.delete(f"/chatflows/{flow_id}")
    assert again.status_code == 500
    assert again.json()["message"] == (
        f"Error: chatflowsService.deleteChatflow - Chatflow {flow_id} not found in the database!"
    )


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"name": "x", "flowData": "{}"}, 400, "Invalid Chatflow Type"),
        ({}, 400, "Invalid Chatflow Type"),
        (create_body({"nodes": [], "edges": []}, type="WORKFLOW"), 400, "Invalid Chatflow Type"),
        (
            {"flowData": '{"nodes": [], "edges": []}', "type": "CHATFLOW"},
            500,
            "SQLITE_CONSTRAINT: NOT NULL constraint failed: chat_flow.name",
        ),
        ({"name": "x", "type": "CHATFLOW"}, 500, '"undefined" is not valid JSON'),
        (create_body("not json{"), 500, "Unexpected token 'o', \"not json{\" is not valid JSON"),
        (create_body("{}"), 500, "nodes is not iterable"),
    ],
)
def test_create_errors(client: httpx.Client, body: dict[str, Any], status: int, message: str) -> None:
    reply = client.post("/chatflows", json=body)
    assert reply.status_code == status
    assert reply.json() == {"statusCode": status, "success": False, "message": message, "stack": {}}
    assert client.get("/chatflows").json() == []  # nothing saved


def test_recorded_error_answers(client: httpx.Client) -> None:
    reply = client.post("/chatflows", json={"name": "x", "flowData": "{}"})
    assert reply.json() == load("error_post_bad_type.json") == load("error_post_empty_body.json")
    bad_id = client.get("/chatflows/not-a-uuid")
    assert (bad_id.status_code, bad_id.json()["message"]) == (400, "Invalid Chatflow ID")
    missing = str(uuid.uuid4())
    assert client.get(f"/chatflows/{missing}").status_code == 404
    assert client.put(f"/chatflows/{missing}", json={"name": "x"}).status_code == 404
    validation = client.get(f"/validation/{missing}")
    assert validation.status_code == 500
    assert validation.json()["message"].endswith("Error: validationService.checkFlowValidation - flow not found!")


def test_validation_matches_the_recorded_answers(client: httpx.Client) -> None:
    """The live folder holds a flow built from live definitions and what Flowise 3.1.2 said about it,
    whole and without its memory edge."""
    flow = load("created_flowData.json")
    flow_id = client.post("/chatflows", json=create_body(flow)).json()["id"]
    assert client.get(f"/validation/{flow_id}").json() == load("validation_response.json")

    flow["edges"] = [e for e in flow["edges"] if e["source"] != "bufferMemory_0"]
    flow_id = client.post("/chatflows", json=create_body(flow)).json()["id"]
    assert client.get(f"/validation/{flow_id}").json() == load("validation_response_broken.json")


def test_validation_of_the_minimal_flow_created_without_credentials(client: httpx.Client) -> None:
    flow_id = client.post("/chatflows", json=create_body(minimal_flow())).json()["id"]
    assert client.get(f"/validation/{flow_id}").json() == [
        {
            "id": "chatOpenAI_0",
            "label": "ChatOpenAI",
            "name": "chatOpenAI",
            "issues": ["Connect Credential is required", "Credential is required"],
        }
    ]


def node(node_id: str, params: list[dict[str, Any]], inputs: dict[str, Any], name: str = "n") -> dict[str, Any]:
    return {"id": node_id, "data": {"name": name, "label": node_id.upper(), "inputParams": params, "inputs": inputs}}


def test_validation_rules() -> None:
    text = {"label": "Text", "name": "text", "type": "string"}
    a, b = node("a", [text], {"text": ""}), node("b", [text], {"text": 0})  # 0 is a value, "" is not
    edges = [
        {"id": "ab", "source": "a", "target": "b"},
        {"id": "ax", "source": "a", "target": "ghost"},
        {"id": "xb", "source": "ghost", "target": "b"},
        {"id": "xy", "source": "x", "target": "y"},
    ]
    assert validate_flow_data([a, b], edges, {}) == [
        {
            "id": "a",
            "label": "A",
            "name": "n",
            "issues": ["Text is required", "Connected to non-existent target node ghost"],
        },
        {"id": "b", "label": "B", "name": "n", "issues": ["Connected to non-existent source node ghost"]},
        {
            "id": "xy",
            "label": "Edge xy",
            "name": "edge",
            "issues": ["Disconnected edge - both source and target nodes do not exist"],
        },
    ]
    lone = node(
        "c",
        [{**text, "show": {"mode": "advanced"}}, {**text, "name": "t2", "hide": {"mode": "simple"}}],
        {"mode": "simple"},
    )
    sticky = {"id": "s", "data": {"name": "stickyNoteAgentflow"}}
    assert validate_flow_data([lone, sticky], [], {}) == [
        {"id": "c", "label": "C", "name": "n", "issues": ["This node is not connected to anything"]}
    ]

    rows = {
        "label": "Rows",
        "name": "rows",
        "type": "array",
        "optional": True,
        "array": [
            {"label": "Key", "name": "key", "type": "string"},
            {"label": "Value", "name": "value", "type": "string", "show": {"key": ["x", "y"]}},
        ],
    }
    model = {"label": "Model", "name": "model", "type": "asyncOptions"}
    item = node(
        "d",
        [rows, model],
        {"rows": [{"key": "x", "value": "<p></p>"}, {"key": ""}], "model": "chatX", "modelConfig": {"temperature": ""}},
    )
    components = {
        "chatX": {
            "inputs": [{"label": "Temperature", "name": "temperature", "type": "number"}],
            "credential": {"name": "credential", "type": "credential"},
        }
    }
    assert validate_flow_data([item], [{"source": "d", "target": "d"}], components)[0]["issues"] == [
        "Rows item #1: Value is required",
        "Rows item #2: Key is required",
        "Model configuration: Temperature is required",
        "Model requires a credential",
    ]


def test_validation_follows_javascript() -> None:
    assert v8_json_error('{"a":1,}') == "Expected double-quoted property name in JSON at position 7"
    assert v8_json_error("") == "Unexpected end of JSON input"
    assert v8_json_error("[object Object]") == '"[object Object]" is not valid JSON'
    with pytest.raises(JSError, match=r"reading 'forEach'"):
        validate_flow_data([], UNDEFINED, {})
    with pytest.raises(JSError, match="nodes is not iterable"):
        validate_flow_data({}, [], {})
    # === compares types: true is not 1, and "1" is not 1
    flag = {"label": "Flag", "name": "flag", "type": "string", "show": {"on": True}}
    assert validate_flow_data([node("e", [flag], {"on": 1})], [{"source": "e", "target": "e"}], {}) == []
    assert validate_flow_data([node("e", [flag], {"on": True})], [{"source": "e", "target": "e"}], {}) != []


def test_validation_of_a_broken_flow_is_a_500(fake_flowise: FakeFlowise, client: httpx.Client) -> None:
    flow_id = client.post("/chatflows", json=create_body({"nodes": []})).json()["id"]  # saves: no edges needed
    reply = client.get(f"/validation/{flow_id}")
    assert reply.status_code == 500
    assert reply.json()["message"] == (
        "Error: validationService.checkFlowValidation - Cannot read properties of undefined (reading 'forEach')"
    )


def test_fail_next_and_outage(fake_flowise: FakeFlowise, client: httpx.Client) -> None:
    fake_flowise.fail_next(2)
    assert [client.get("/nodes/chatOpenAI").status_code for _ in range(3)] == [503, 503, 200]
    fake_flowise.fail_next(1, status=502)
    assert httpx.get(f"{fake_flowise.url}/api/v1/ping").status_code == 502  # before auth, any path
    fake_flowise.fail_next(1, status=500, path="/marketplaces")
    assert client.get("/nodes").status_code == 200  # other paths are not touched
    assert client.get("/marketplaces/templates").status_code == 500
    assert client.get("/marketplaces/templates").status_code == 200
    flow_id = client.post("/chatflows", json=create_body(minimal_flow())).json()["id"]

    port = fake_flowise.port
    fake_flowise.stop()
    with pytest.raises(httpx.ConnectError):
        client.get("/version")  # the kept-alive connection is gone too
    fake_flowise.start()
    assert fake_flowise.port == port
    assert client.get(f"/chatflows/{flow_id}").status_code == 200  # state survives an outage
    assert fake_flowise.requests[:5] == [("GET", "/api/v1/nodes/chatOpenAI")] * 3 + [
        ("GET", "/api/v1/ping"),
        ("GET", "/api/v1/nodes"),
    ]
    assert ("GET", "/api/v1/version") not in fake_flowise.requests  # refused, never seen


def test_each_fake_is_fresh(fake_flowise: FakeFlowise) -> None:
    with FakeFlowise() as other:
        assert other.port != fake_flowise.port and other.api_key != fake_flowise.api_key
        other.node("chatOpenAI")["version"] = 1
        assert fake_flowise.node("chatOpenAI")["version"] == 8.3


# --- the fake against a real Flowise 3.1.2 ------------------------------------------------------------


def validation_cases() -> dict[str, dict[str, Any]]:
    """Flows whose validation the fake must answer exactly like Flowise: the minimal flow, variants that
    break each rule, and every template and marketplace chatflow the live folder holds."""
    cases = {"minimal": minimal_flow(), "live": load("created_flowData.json")}
    broken = copy.deepcopy(cases["live"])
    broken["edges"] = [e for e in broken["edges"] if e["source"] != "bufferMemory_0"]
    cases["memory not connected"] = broken
    emptied = copy.deepcopy(cases["minimal"])
    emptied["nodes"][0]["data"]["inputs"].update(modelName="", credential="some-credential-id")
    cases["required param empty"] = emptied
    dangling = copy.deepcopy(cases["minimal"])
    dangling["edges"] += [
        {"id": "e1", "source": "ghost_0", "target": "conversationChain_0"},
        {"id": "e2", "source": "conversationChain_0", "target": "ghost_1"},
        {"id": "e3", "source": "ghost_2", "target": "ghost_3"},
    ]
    cases["dangling edges"] = dangling
    hidden = copy.deepcopy(cases["minimal"])
    hidden["nodes"][1]["data"]["inputs"]["memoryKey"] = None
    hidden["nodes"][1]["data"]["inputParams"][1]["show"] = {"sessionId": ""}
    hidden["nodes"][0]["data"]["inputParams"][2]["optional"] = False
    hidden["nodes"][0]["data"]["inputs"]["temperature"] = 0
    cases["show condition and zero"] = hidden
    for template in load("marketplaces_templates.json"):
        if "flowData" in template:
            cases[f"template {template['templateName']}"] = json.loads(template["flowData"])
    for path in sorted(TEMPLATES.glob("*.json")):
        flow = json.loads(path.read_text(encoding="utf-8"))
        cases[f"marketplace {path.stem}"] = {"nodes": flow["nodes"], "edges": flow["edges"]}
    return cases


def validations(url: str, api_key: str, cases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Create each flow, read /validation/<id>, delete it."""
    answers: dict[str, Any] = {}
    with api(url, api_key) as c:
        for name, flow in cases.items():
            created = c.post("/chatflows", json=create_body(flow, name=f"agentloom test: {name}"))
            assert created.status_code == 200, (name, created.text[:300])
            flow_id = created.json()["id"]
            try:
                reply = c.get(f"/validation/{flow_id}")
                answers[name] = (reply.status_code, reply.json())
            finally:
                assert c.delete(f"/chatflows/{flow_id}").status_code == 200
    return answers


@pytest.mark.slow
def test_fake_validation_matches_real_flowise(live_flowise: tuple[str, str], fake_flowise: FakeFlowise) -> None:
    url, api_key = live_flowise
    cases = validation_cases()
    real = validations(url, api_key, cases)
    fake = validations(fake_flowise.url, fake_flowise.api_key, cases)
    assert real["minimal"] == (
        200,
        [
            {
                "id": "chatOpenAI_0",
                "label": "ChatOpenAI",
                "name": "chatOpenAI",
                "issues": ["Connect Credential is required", "Credential is required"],
            }
        ],
    )
    assert sum(len(body) for _, body in real.values()) > 150  # the cases do exercise the rules
    assert {name: answer for name, answer in fake.items() if answer != real[name]} == {}


def normalized(value: Any) -> Any:
    """An answer with the values that differ between any two servers (ids, times) blanked."""
    if isinstance(value, str):
        return DATE.sub("<date>", UUID_ANY.sub("<uuid>", value))
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    return value


def wire_scenario(url: str, api_key: str) -> list[tuple[str, int, str, Any]]:
    """A run of requests covering the fake's routes, errors included; each answer reduced to what must agree."""
    answers: list[tuple[str, int, str, Any]] = []
    with api(url, api_key) as c, api(url, None) as anonymous:

        def record(label: str, reply: httpx.Response, reduce: Callable[[Any], Any] = lambda body: body) -> Any:
            kind = reply.headers.get("content-type", "").split(";")[0]
            title = re.search(r"<title>(.*?)</title>", reply.text)
            body = reduce(reply.json()) if kind == "application/json" else title.group(1) if title else reply.text
            answers.append((label, reply.status_code, kind, normalized(body)))
            return reply.json() if kind == "application/json" else None

        record("ping", anonymous.get("/ping"))
        record("version", anonymous.get("/version"))
        record("no key", anonymous.get("/nodes"))
        record("nodes", c.get("/nodes"), lambda body: [(n["name"], n["version"], n.get("badge")) for n in body])
        record(
            "node",
            c.get("/nodes/conversationChain"),
            lambda body: {k: v for k, v in body.items() if k not in ("icon", "filePath")},
        )
        record("unknown node", c.get("/nodes/noSuchNode"))
        record("nodes-list", c.get("/nodes-list"))
        record(
            "templates",
            c.get("/marketplaces/templates"),
            lambda body: [{k: v for k, v in t.items() if k != "id"} for t in body],
        )
        flow = json.dumps(minimal_flow())
        for label, body in [
            ("no type", {"name": "x", "flowData": flow}),
            ("no name", {"flowData": flow, "type": "CHATFLOW"}),
            ("no flowData", {"name": "x", "type": "CHATFLOW"}),
            ("text flowData", create_body("nodes: [] and more text")),
            ("object flowData", {**create_body(flow), "flowData": minimal_flow()}),
        ]:
            record(f"create, {label}", c.post("/chatflows", json=body))
        created = record(
            "create",
            c.post("/chatflows", json=create_body(flow, foo="dropped", category="a;b")),
            lambda body: {**body, "keys": list(body)},
        )
        flow_id = created["id"]
        try:
            record("get", c.get(f"/chatflows/{flow_id}"), lambda body: {**body, "keys": list(body)})
            record("get, not a uuid", c.get("/chatflows/abc"))
            record("get, missing", c.get(f"/chatflows/{uuid.uuid4()}"))
            record(
                "list has it",
                c.get("/chatflows", params={"type": "CHATFLOW"}),
                lambda body: [f["id"] == flow_id for f in body].count(True),
            )
            renamed = {"name": "renamed", "category": None, "deployed": True}
            record("put", c.put(f"/chatflows/{flow_id}", json=renamed), lambda body: {**body, "keys": list(body)})
            bodies: list[tuple[str, dict[str, Any]]] = [
                ("bad type", {"type": "X"}),
                ("empty type", {"type": ""}),
                ("null name", {"name": None}),
                ("null flowData", {"flowData": None}),
                ("text flowData", {"flowData": "nope"}),
                ("blank flowData", {"flowData": ""}),
                ("bad chatbotConfig", {"chatbotConfig": "{x"}),
            ]
            for label, body in bodies:
                record(f"put, {label}", c.put(f"/chatflows/{flow_id}", json=body))
            record("put, missing", c.put(f"/chatflows/{uuid.uuid4()}", json={"name": "x"}))
            record("get after puts", c.get(f"/chatflows/{flow_id}"))
            record("validation, missing", c.get(f"/validation/{uuid.uuid4()}"))
        finally:
            record("delete", c.delete(f"/chatflows/{flow_id}"))
        record("delete again", c.delete(f"/chatflows/{flow_id}"))
        record("get deleted", c.get(f"/chatflows/{flow_id}"))
    return answers


@pytest.mark.slow
def test_fake_answers_like_real_flowise(live_flowise: tuple[str, str], fake_flowise: FakeFlowise) -> None:
    real = wire_scenario(*live_flowise)
    fake = wire_scenario(fake_flowise.url, fake_flowise.api_key)
    assert [a[0] for a in fake] == [a[0] for a in real]
    assert [(f, r) for f, r in zip(fake, real, strict=True) if f != r] == []
