"""plan_flow: chatflows from node names alone, checked against the rules and the shipped templates."""

from __future__ import annotations

import functools
from itertools import combinations
from typing import Any

import pytest

from agentloom.packs.flowise.flowdata import check_flow
from agentloom.packs.flowise.layout import COLUMN_PITCH
from agentloom.packs.flowise.planner import PlanError, _Input, _Output, edge_cost, plan_flow, replay_marketplace
from tests.packs.flowise.fake_flowise import TEMPLATES, load


@functools.cache
def _tokenizer() -> Any:
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService

    tokenizer = EmbeddingService(Settings(), BreakerRegistry()).tokenizer("all-MiniLM-L6-v2")
    assert tokenizer is not None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def tokens(text: str) -> int:
    """WordPiece tokens (all-MiniLM-L6-v2), which split camelCase names finer than chat-model BPE."""
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def links(flow: dict[str, Any]) -> set[tuple[str, str, str]]:
    names = {n["id"]: n["data"]["name"] for n in flow["nodes"]}
    return {(names[e["source"]], names[e["target"]], e["targetHandle"].split("-")[2]) for e in flow["edges"]}


def plan_error(names: list[str], catalog: dict[str, Any]) -> str:
    with pytest.raises(PlanError) as caught:
        plan_flow(names, catalog)
    message = str(caught.value)
    assert tokens(message) < 50, message
    return message


def test_conversation_chain_from_three_names(catalog: dict[str, Any]) -> None:
    flow = plan_flow(["chatOpenAI", "bufferMemory", "conversationChain"], catalog)
    assert check_flow(flow, catalog) == []
    assert [n["id"] for n in flow["nodes"]] == ["chatOpenAI_0", "bufferMemory_0", "conversationChain_0"]
    assert links(flow) == {
        ("chatOpenAI", "conversationChain", "model"),
        ("bufferMemory", "conversationChain", "memory"),
    }
    chain = flow["nodes"][2]["data"]["inputs"]
    assert chain["model"] == "{{chatOpenAI_0.data.instance}}" and chain["memory"] == "{{bufferMemory_0.data.instance}}"


def test_wiring_is_by_type_not_by_list_order(catalog: dict[str, Any]) -> None:
    names = [
        "conversationalRetrievalQAChain",
        "recursiveCharacterTextSplitter",
        "chatOpenAI",
        "faiss",
        "openAIEmbeddings",
        "textFile",
    ]
    flow = plan_flow(names, catalog)
    assert check_flow(flow, catalog) == []
    assert links(flow) == {
        ("recursiveCharacterTextSplitter", "textFile", "textSplitter"),
        ("textFile", "faiss", "document"),
        ("openAIEmbeddings", "faiss", "embeddings"),
        ("faiss", "conversationalRetrievalQAChain", "vectorStoreRetriever"),
        ("chatOpenAI", "conversationalRetrievalQAChain", "model"),
    }
    faiss = next(n for n in flow["nodes"] if n["id"] == "faiss_0")["data"]
    assert faiss["outputs"] == {"output": "retriever"}
    assert faiss["inputs"]["document"] == ["{{textFile_0.data.instance}}"]
    assert links(plan_flow(list(reversed(names)), catalog)) == links(flow)


def test_a_specific_class_beats_a_general_one() -> None:
    chat = _Output(None, ("ChatOpenAI", "BaseChatOpenAI", "BaseChatModel", "BaseLanguageModel", "Runnable"), 0)

    def slot(classes: str, variable: bool = False) -> _Input:
        return _Input(0, "x", classes, frozenset({classes}), True, False, variable)

    chat_model, language_model = edge_cost(chat, slot("BaseChatModel")), edge_cost(chat, slot("BaseLanguageModel"))
    assert chat_model is not None and language_model is not None and chat_model < language_model
    assert edge_cost(chat, slot("BaseMemory")) is None
    runnable = edge_cost(chat, slot("Runnable"))
    assert runnable is not None and runnable > language_model


def test_two_models_fill_the_chain_and_the_moderation(catalog: dict[str, Any]) -> None:
    flow = plan_flow(["llmChain", "chatOpenAI", "promptTemplate", "inputModerationSimple", "chatOpenAI"], catalog)
    assert check_flow(flow, catalog) == []
    assert ("inputModerationSimple", "llmChain", "inputModeration") in links(flow)
    assert ("chatOpenAI", "inputModerationSimple", "model") in links(flow)


def test_one_embeddings_node_feeds_two_vector_stores(catalog: dict[str, Any]) -> None:
    names = [
        "openAIEmbeddings",
        "faiss",
        "memoryVectorStore",
        "retrieverTool",
        "retrieverTool",
        "toolAgent",
        "chatOpenAI",
        "bufferMemory",
    ]
    flow = plan_flow(names, catalog)
    assert check_flow(flow, catalog) == []
    fed = {e["target"] for e in flow["edges"] if e["source"] == "openAIEmbeddings_0"}
    assert fed == {"faiss_0", "memoryVectorStore_0"}


def test_plan_is_deterministic(catalog: dict[str, Any]) -> None:
    names = ["chatOpenAI", "calculator", "serpAPI", "bufferMemory", "toolAgent"]
    assert plan_flow(names, catalog) == plan_flow(names, catalog)


def test_layout_runs_left_to_right_without_overlaps(catalog: dict[str, Any]) -> None:
    names = [
        "openAIEmbeddings",
        "recursiveCharacterTextSplitter",
        "textFile",
        "conversationalRetrievalQAChain",
        "faiss",
        "documentStore",
        "chatMistralAI",
        "bufferMemory",
    ]
    flow = plan_flow(names, catalog)
    nodes = {n["id"]: n for n in flow["nodes"]}
    for edge in flow["edges"]:
        assert nodes[edge["target"]]["position"]["x"] - nodes[edge["source"]]["position"]["x"] >= COLUMN_PITCH
    for a, b in combinations(flow["nodes"], 2):
        if a["position"]["x"] == b["position"]["x"]:
            top, low = sorted((a, b), key=lambda n: n["position"]["y"])
            assert low["position"]["y"] - top["position"]["y"] >= max(200, top["height"])
        else:
            assert abs(a["position"]["x"] - b["position"]["x"]) >= 300
    assert all(142 <= n["height"] <= 900 and n["width"] == 300 for n in flow["nodes"])
    assert max(n["position"]["x"] for n in flow["nodes"]) == nodes["conversationalRetrievalQAChain_0"]["position"]["x"]


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (
            ["conversationalRetrievalQAChain", "chatOpenAI"],
            "conversationalRetrievalQAChain needs a BaseRetriever (vectorStoreRetriever): "
            "add a vector store such as faiss",
        ),
        (["chatOpenAI", "bufferMemory"], "no ending node"),
        (["chatOpenAI", "calculator", "conversationChain", "bufferMemory"], "calculator's output fits no input here"),
        (["chatOpenAI", "chatOpenAI", "conversationChain", "bufferMemory"], "only 1 input(s) take them"),
        (
            ["chatOpenAI", "chatOpenAI", "conversationChain", "conversationChain", "bufferMemory", "bufferMemory"],
            "conversationChain appears twice",
        ),
        (
            ["llmChain", "conversationChain", "chatOpenAI", "promptTemplate", "bufferMemory"],
            "only one chain, agent or engine ends a flow",
        ),
        (
            ["chatOpenAI", "bufferMemory", "conversationChain", "noSuchNode", "csvAgent"],
            "unknown Flowise nodes: csvAgent, noSuchNode",
        ),
        (["toolAgent", "chatOpenAI", "bufferMemory"], "toolAgent needs a Tool (tools): add a tool such as calculator"),
        (["stickyNote", "chatOpenAI", "conversationChain"], "stickyNote is a canvas note"),
        (["agentAgentflow", "chatOpenAI"], "Agentflow V2"),
        ([], "no nodes given"),
    ],
)
def test_plan_errors_name_the_missing_piece_briefly(catalog: dict[str, Any], names: list[str], expected: str) -> None:
    assert expected in plan_error(names, catalog)


def marketplace() -> dict[str, dict[str, Any]]:
    return {p.stem: load(p) for p in sorted(TEMPLATES.glob("*.json"))}


def test_replay_marketplace(catalog: dict[str, Any]) -> None:
    """Each shipped chatflow, planned from its node names only (sticky notes aside).

    22 of 24 plan into a flow check_flow finds sound, and all 22 reproduce the template's own
    connections (as a set of (source name, target name, input)). The other two use nodes that
    3.1.2 fails to load (csvAgent, reactAgentChat), and the PlanError names them.
    """
    results = replay_marketplace(marketplace(), catalog)
    valid = sorted(t for t, r in results.items() if r["valid"])
    reproduced = sorted(t for t, r in results.items() if r["reproduced"])
    print(f"\nmarketplace replay: {len(valid)}/24 valid, {len(reproduced)}/24 reproduce the template's connections")
    for title, result in results.items():
        if not result["reproduced"]:
            print(f"  {title}: {result['error'] or result['issues'] or (result['missing'], result['extra'])}")
    assert len(results) == 24
    assert len(valid) >= 22 and len(reproduced) >= 22
    assert "csvAgent" in results["CSV Agent"]["error"]
    assert "reactAgentChat" in results["ReAct Agent"]["error"]
    assert all(tokens(r["error"]) < 50 for r in results.values() if r["error"])
