"""build_flow's own rules, word for word: argument refusals (before anything is fetched or created), how a
template is found, the credentials the user must pick and the default name of a planned flow."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from agentloom.core.errors import AgentloomError
from agentloom.packs.flowise.builder import MAX_NODES, Builder, _credentials, _default_name
from agentloom.packs.flowise.catalog import CatalogState, Template
from agentloom.packs.flowise.documents import DOCUMENTS
from tests.packs.flowise.fake_flowise import FakeFlowise
from tests.packs.flowise.test_catalog import open_flowise

CHAT = Template("conversation-chain", "7f0c", "Conversation Chain", "", [], ["chatOpenAI"], {"nodes": [], "edges": []})
LLM = Template("llm-chain", "9a1b", "LLM Chain", "", [], ["llmChain"], {"nodes": [], "edges": []})


@pytest.fixture
def builder(tmp_path: Path) -> Builder:
    """A builder over a fresh catalog.json holding two templates, its Flowise stopped: whatever reaches the
    server fails, so a refusal proves it was decided before any request."""
    with FakeFlowise() as fake:
        pass
    state = open_flowise(fake, tmp_path)
    fresh = CatalogState(time.time(), "3.1.2", fake.url, "all-MiniLM-L6-v2", {}, {t.template_id: t for t in (CHAT, LLM)}, DOCUMENTS)
    state.catalog.path.write_text(json.dumps(asdict(fresh)))
    return state.builder


def refusal(builder: Builder, **arguments: Any) -> str:
    given: dict[str, Any] = {"template_id": None, "nodes": None, "name": None, "model": None, "temperature": None,
                             "memory_type": None, **arguments}
    with pytest.raises(AgentloomError) as caught:
        builder.build(**given)
    return str(caught.value)


def test_argument_refusals_word_for_word(builder: Builder) -> None:
    both = "give template_id or nodes (a list of node names), not both or neither."
    assert refusal(builder) == both
    assert refusal(builder, template_id="conversation-chain", nodes=["llmChain"]) == both
    assert refusal(builder, template_id="conversation-chain", name="  ") == (
        "name is empty; give the chatflow a name or leave it out.")
    assert refusal(builder, template_id="conversation-chain", temperature=2.5) == "temperature 2.5 is outside 0-2."
    assert refusal(builder, template_id="conversation-chain", temperature=-0.1) == "temperature -0.1 is outside 0-2."
    count = f"nodes must list 1 to {MAX_NODES} node names."
    assert refusal(builder, nodes=[]) == count
    assert refusal(builder, nodes=["chatOpenAI"] * (MAX_NODES + 1)) == count


def test_boundaries_are_accepted(builder: Builder) -> None:
    """0 and 2 are temperatures, 30 names a list: each refusal below comes from the next step instead."""
    unknown = "template_id 'nothing' unknown; flowise_search_templates finds one."
    assert refusal(builder, template_id="nothing", temperature=0) == unknown
    assert refusal(builder, template_id="nothing", temperature=2) == unknown
    assert refusal(builder, template_id="nothing", name="My flow") == unknown
    assert refusal(builder, nodes=["chatOpenAI"] * MAX_NODES) == (
        "unknown Flowise node: chatOpenAI; use names from the node catalog")


def test_a_template_is_found_by_id_name_or_flowise_id(builder: Builder) -> None:
    for given in ("conversation-chain", " conversation-chain ", "Conversation Chain", "7f0c"):
        assert builder.template(given) == CHAT, given
    assert builder.template("9a1b") == LLM
    with pytest.raises(AgentloomError, match=r"^template_id '7f0' unknown; flowise_search_templates finds one\.$"):
        builder.template("7f0")


def node(node_id: str, name: str, label: str | None = None, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "data": {"name": name, "label": label or name, **data}}


def test_credentials_name_each_node_that_needs_one() -> None:
    catalog = {
        "chatOpenAI": {"credential": {"credentialNames": ["openAIApi"]}},
        "pinecone": {"credential": {"credentialNames": ["pineconeApi", "pineconeEnv"]}},
        "redisCache": {"credential": {"credentialNames": ["redisCacheApi"], "optional": True}},
        "bufferMemory": {},
    }
    flow = {"nodes": [node("chatOpenAI_0", "chatOpenAI"), node("pinecone_0", "pinecone"), node("redisCache_0", "redisCache"),
                      node("bufferMemory_0", "bufferMemory"),
                      # A node the catalog lacks: its own data says what it needs.
                      node("oldNode_0", "oldNode", credential={"credentialNames": ["oldApi"]})]}
    assert _credentials(flow, catalog) == ["openAIApi for chatOpenAI_0", "pineconeApi|pineconeEnv for pinecone_0",
                                           "oldApi for oldNode_0"]
    assert _credentials({"nodes": []}, catalog) == []


def test_default_name_is_the_ending_node_and_the_count() -> None:
    flow = {"nodes": [node("chatOpenAI_0", "chatOpenAI", "ChatOpenAI"), node("bufferMemory_0", "bufferMemory", "Buffer Memory"),
                      node("conversationChain_0", "conversationChain", "Conversation Chain")],
            "edges": [{"source": "chatOpenAI_0", "target": "conversationChain_0"},
                      {"source": "bufferMemory_0", "target": "conversationChain_0"}]}
    assert _default_name(flow) == "Conversation Chain (3 nodes)"
    alone = {"nodes": [node("llmChain_0", "llmChain", "LLM Chain")], "edges": []}
    assert _default_name(alone) == "LLM Chain (1 nodes)"
