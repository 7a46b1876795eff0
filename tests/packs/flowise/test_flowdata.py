"""flowData pieces against what a real Flowise 3.1.2 and its shipped templates hold."""

from __future__ import annotations

import copy
import statistics
from typing import Any

import pytest

from agentloom.packs.flowise.flowdata import (
    check_flow,
    compatible,
    connect,
    estimate_height,
    handle_classes,
    init_node_data,
    new_node,
    new_node_id,
    reference,
)
from agentloom.packs.flowise.layout import ROW_GAP
from tests.packs.flowise.fake_flowise import FLOWISE_DATA as DATA
from tests.packs.flowise.fake_flowise import TEMPLATES, load, template


def node_of(flow: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in flow["nodes"] if n["id"] == node_id)


def without(items: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if k not in keys} for item in items]


def test_new_node_id_takes_the_smallest_free_number_and_refuses_dashes() -> None:
    assert new_node_id("chatOpenAI", []) == "chatOpenAI_0"
    assert new_node_id("chatOpenAI", ["chatOpenAI_0", "chatOpenAI_2"]) == "chatOpenAI_1"
    with pytest.raises(ValueError, match="'-'"):
        new_node_id("chat-model", [])
    with pytest.raises(ValueError, match="'-'"):
        init_node_data({"name": "x", "baseClasses": []}, "x-0")


def test_init_node_data_equals_the_live_server_flow(catalog: dict[str, Any]) -> None:
    """created_flowData.json was saved on a real 3.1.2 from the same catalog versions."""
    created = load(DATA / "live-3.1.2" / "created_flowData.json")
    for node in created["nodes"]:
        real = node["data"]
        mine = init_node_data(catalog[real["name"]], node["id"])
        assert real["version"] == mine["version"]
        for key in ("id", "inputAnchors", "inputParams", "outputAnchors", "outputs", "baseClasses", "category"):
            assert mine[key] == real[key], (real["name"], key)
        assert mine["inputParams"][0]["id"] == f"{node['id']}-input-credential-credential" or not any(
            p["type"] == "credential" for p in mine["inputParams"]
        )
        # Inputs: same keys and values, except that the UI's `default || ''` turns a false default
        # into '' (as the shipped templates show), where that file's writer kept False.
        for name, value in real["inputs"].items():
            if isinstance(value, str) and value.startswith("{{"):
                assert mine["inputs"][name] == ""
            elif value is False:
                assert mine["inputs"][name] == ""
            else:
                assert mine["inputs"][name] == value, (real["name"], name)
        assert set(mine["inputs"]) == set(real["inputs"])


@pytest.mark.parametrize(
    ("title", "node_id"),
    [
        ("Conversation Chain", "bufferMemory_0"),
        ("Conversation Chain", "conversationChain_0"),
        ("Local QnA", "faiss_0"),
        ("Tool Agent", "toolAgent_0"),
        ("Tool Agent", "bufferMemory_1"),
    ],
)
def test_init_node_data_equals_the_marketplace_node_of_the_same_version(
    catalog: dict[str, Any], title: str, node_id: str
) -> None:
    real = node_of(template(title), node_id)["data"]
    mine = init_node_data(catalog[real["name"]], node_id)
    assert real["version"] == mine["version"]
    # The UI of 3.1 adds `display` (show/hide state) and output descriptions; older exports lack them.
    assert without(mine["inputAnchors"], "display") == without(real["inputAnchors"], "display")
    assert [p["id"] for p in mine["inputParams"]] == [p["id"] for p in real["inputParams"]]
    assert without(mine["outputAnchors"], "description", "options") == without(
        real["outputAnchors"], "description", "options"
    )
    mine_options = [without(a.get("options", []), "description") for a in mine["outputAnchors"]]
    assert mine_options == [without(a.get("options", []), "description") for a in real["outputAnchors"]]
    assert mine["outputs"] == real["outputs"]
    assert set(mine["inputs"]) == set(real["inputs"])


def test_several_outputs_become_one_options_anchor(catalog: dict[str, Any]) -> None:
    data = init_node_data(catalog["faiss"], "faiss_0")
    assert [a["name"] for a in data["outputAnchors"]] == ["output"]
    anchor = data["outputAnchors"][0]
    assert anchor["type"] == "options" and anchor["default"] == "retriever"
    assert [o["id"] for o in anchor["options"]] == [
        "faiss_0-output-retriever-Faiss|VectorStoreRetriever|BaseRetriever",
        "faiss_0-output-vectorStore-Faiss|SaveableVectorStore|VectorStore",
    ]
    assert anchor["options"][1]["type"] == "Faiss | SaveableVectorStore | VectorStore"
    assert data["outputs"] == {"output": "retriever"}


def test_init_node_data_follows_javascript_defaults_and_drops_server_keys() -> None:
    definition: dict[str, Any] = {
        "name": "demo",
        "label": "Demo",
        "type": "Demo",
        "category": "Chains",
        "version": 1,
        "baseClasses": ["Demo", "BaseChain"],
        "filePath": "/srv/x.js",
        "loadMethods": {},
        "icon": "x.svg",
        "credential": {"label": "Key", "name": "credential", "type": "credential"},
        "inputs": [
            {"name": "off", "type": "boolean", "default": False},
            {"name": "zero", "type": "number", "default": 0},
            {"name": "rows", "type": "array", "default": []},
            {"name": "model", "type": "BaseChatModel"},
        ],
    }
    data = init_node_data(definition, "demo_0")
    assert data["inputs"] == {"off": "", "zero": "", "rows": [], "model": ""}
    assert [p["name"] for p in data["inputParams"]] == ["credential", "off", "zero", "rows"]
    assert data["inputAnchors"][0]["id"] == "demo_0-input-model-BaseChatModel"
    assert not {"filePath", "loadMethods", "icon", "credential"} & set(data)
    assert definition["inputs"][0] == {"name": "off", "type": "boolean", "default": False}  # not mutated
    hidden = init_node_data({**definition, "hideOutput": True}, "demo_1")
    assert hidden["outputAnchors"] == [] and hidden["outputs"] == {}


def test_node_object_has_the_canvas_shape(catalog: dict[str, Any]) -> None:
    node = new_node(catalog["chatOpenAI"], "chatOpenAI_0", 100, 200)
    real = template("Tool Agent")["nodes"][0]
    assert set(node) == set(real)
    assert node["type"] == "customNode" and node["width"] == 300 and node["selected"] is False
    assert node["positionAbsolute"] == node["position"] == {"x": 100, "y": 200}


def test_handle_classes_and_compatibility() -> None:
    source = "chatOpenAI_0-output-chatOpenAI-ChatOpenAI|BaseChatModel|BaseLanguageModel|Runnable"
    assert handle_classes(source) == {"ChatOpenAI", "BaseChatModel", "BaseLanguageModel", "Runnable"}
    assert compatible(source, "llmChain_0-input-model-BaseLanguageModel")
    assert not compatible(source, "conversationChain_0-input-memory-BaseMemory")
    assert handle_classes("seqAgent_0-input-sequentialNode-Start | Agent | LLMNode") == {"Start", "Agent", "LLMNode"}
    assert compatible("seqStart_0-output-seqStart-Start", "seqAgent_0-input-sequentialNode-Start | Agent")


def flow_of(catalog: dict[str, Any], *names: str) -> dict[str, Any]:
    flow: dict[str, Any] = {"nodes": [], "edges": []}
    for k, name in enumerate(names):
        flow["nodes"].append(new_node(catalog[name], new_node_id(name, [n["id"] for n in flow["nodes"]]), 400 * k, 0))
    return flow


def test_connect_writes_the_edge_and_the_input_reference(catalog: dict[str, Any]) -> None:
    flow = flow_of(catalog, "chatOpenAI", "bufferMemory", "conversationChain")
    edge = connect(flow, "chatOpenAI_0", "conversationChain_0", "model")
    assert edge == {
        "source": "chatOpenAI_0",
        "sourceHandle": "chatOpenAI_0-output-chatOpenAI-ChatOpenAI|BaseChatOpenAI|BaseChatModel|"
        "BaseLanguageModel|Runnable",
        "target": "conversationChain_0",
        "targetHandle": "conversationChain_0-input-model-BaseChatModel",
        "type": "buttonedge",
        "id": f"chatOpenAI_0-{edge['sourceHandle']}-conversationChain_0-{edge['targetHandle']}",
    }
    assert node_of(flow, "conversationChain_0")["data"]["inputs"]["model"] == "{{chatOpenAI_0.data.instance}}"
    with pytest.raises(ValueError, match="takes one edge"):
        connect(flow, "chatOpenAI_0", "conversationChain_0", "model")
    with pytest.raises(ValueError, match="does not fit"):
        connect(flow, "chatOpenAI_0", "conversationChain_0", "memory")
    with pytest.raises(ValueError, match="no input"):
        connect(flow, "bufferMemory_0", "conversationChain_0", "nothing")


def test_connect_lists_tools_in_ui_order(catalog: dict[str, Any]) -> None:
    flow = flow_of(catalog, "calculator", "requestsGet", "toolAgent")
    connect(flow, "calculator_0", "toolAgent_0", "tools")
    connect(flow, "requestsGet_0", "toolAgent_0", "tools")
    assert node_of(flow, "toolAgent_0")["data"]["inputs"]["tools"] == [
        reference("requestsGet_0"),
        reference("calculator_0"),
    ]


def test_connect_keeps_one_output_per_node(catalog: dict[str, Any]) -> None:
    flow = flow_of(catalog, "faiss", "retrieverTool", "conversationalRetrievalQAChain", "vectorStoreToDocument")
    edge = connect(flow, "faiss_0", "retrieverTool_0", "retriever")
    assert edge["sourceHandle"].startswith("faiss_0-output-retriever-")
    with pytest.raises(ValueError, match="one output"):
        connect(flow, "faiss_0", "vectorStoreToDocument_0", "vectorStore", output="vectorStore")
    connect(flow, "faiss_0", "conversationalRetrievalQAChain_0", "vectorStoreRetriever")
    assert node_of(flow, "faiss_0")["data"]["outputs"] == {"output": "retriever"}


def test_check_flow_accepts_the_minimal_flow_and_the_live_one(catalog: dict[str, Any]) -> None:
    assert check_flow(load(DATA / "minimal-flowdata.json"), catalog) == []
    assert check_flow(load(DATA / "live-3.1.2" / "created_flowData.json"), catalog) == []


def test_check_flow_on_the_marketplace_finds_only_the_known_faults(catalog: dict[str, Any]) -> None:
    """96 of the 98 template edges are sound; two Pinecone handles are stale; two nodes left 3.1.2."""
    found = {path.stem: check_flow(load(path), catalog) for path in sorted(TEMPLATES.glob("*.json"))}
    faulty = {title: issues for title, issues in found.items() if issues}
    assert sorted(faulty) == ["CSV Agent", "Context Chat Engine", "Query Engine", "ReAct Agent"]
    assert all(len(issues) == 1 for issues in faulty.values())
    assert "no output handle pineconeLlamaIndex_0-output-pineconeLlamaIndex-" in faulty["Query Engine"][0]
    assert "reactAgentChat is not in the server's catalog" in faulty["ReAct Agent"][0]
    edges = sum(len(load(p)["edges"]) for p in TEMPLATES.glob("*.json"))
    assert edges == 98


def broken(mutate: Any) -> list[str]:
    flow = load(DATA / "minimal-flowdata.json")
    mutate(flow)
    return check_flow(flow)


def test_check_flow_names_each_broken_rule(catalog: dict[str, Any]) -> None:
    def drop_reference(flow: dict[str, Any]) -> None:
        node_of(flow, "conversationChain_0")["data"]["inputs"]["memory"] = ""

    def drop_edge(flow: dict[str, Any]) -> None:
        flow["edges"] = [e for e in flow["edges"] if e["source"] != "bufferMemory_0"]

    def second_model(flow: dict[str, Any]) -> None:
        extra = copy.deepcopy(node_of(flow, "chatOpenAI_0"))
        extra["id"] = extra["data"]["id"] = "chatOpenAI_1"
        extra["position"] = {"x": -1000, "y": 0}
        flow["nodes"].append(extra)

    def overlap(flow: dict[str, Any]) -> None:
        node_of(flow, "bufferMemory_0")["position"] = dict(node_of(flow, "chatOpenAI_0")["position"])

    def dash(flow: dict[str, Any]) -> None:
        node = node_of(flow, "bufferMemory_0")
        node["id"] = node["data"]["id"] = "buffer-memory"

    def stale_handle(flow: dict[str, Any]) -> None:
        flow["edges"][0]["targetHandle"] = flow["edges"][0]["targetHandle"].replace("model", "llm")

    assert any("lacks {{bufferMemory_0.data.instance}}" in i for i in broken(drop_reference))
    issues = broken(drop_edge)
    assert any("required input memory" in i for i in issues)
    assert any("bufferMemory_0: not connected" in i for i in issues)
    assert any("refers to bufferMemory_0 without an edge" in i for i in issues)
    assert any("exactly one ending node" in i and "chatOpenAI_1" in i for i in broken(second_model))
    assert broken(overlap) == ["nodes chatOpenAI_0 and bufferMemory_0 overlap"]
    assert any("must not hold '-'" in i for i in broken(dash))
    assert any("has no input handle" in i for i in broken(stale_handle))


def test_height_estimate_fits_the_marketplace_nodes() -> None:
    errors = [
        estimate_height(n["data"]) - n["height"]
        for p in TEMPLATES.glob("*.json")
        for n in load(p)["nodes"]
        if n["data"]["name"] != "stickyNote"
    ]
    assert len(errors) == 120
    assert statistics.mean(abs(e) for e in errors) < 30
    # Underestimates larger than the layout's gap would let real nodes touch: keep them rare.
    assert sum(e < -ROW_GAP for e in errors) <= 4
