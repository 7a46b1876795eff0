"""build_flow's own rules, word for word: argument refusals (before anything is fetched or created), how a
template is found, the credentials the user must pick and the default name of a planned flow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentloom.core.errors import AgentloomError
from agentloom.packs.flowise.builder import MAX_NODES, Builder, _default_name
from agentloom.packs.flowise.catalog import Template
from agentloom.packs.flowise.credentials import attach
from tests.packs.flowise.fake_flowise import FakeFlowise
from tests.packs.flowise.test_catalog import saved_catalog

CHAT = Template("conversation-chain", "7f0c", "Conversation Chain", "", [], ["chatOpenAI"], {"nodes": [], "edges": []})
LLM = Template("llm-chain", "9a1b", "LLM Chain", "", [], ["llmChain"], {"nodes": [], "edges": []})


ARGS: dict[str, Any] = {
    "template_id": None,
    "nodes": None,
    "name": None,
    "model": None,
    "temperature": None,
    "memory_type": None,
}


@pytest.fixture
def builder(stopped: FakeFlowise, tmp_path: Path) -> Builder:
    """A builder over a fresh catalog.json holding two templates, its Flowise stopped: whatever reaches the
    server fails, so a refusal proves it was decided before any request."""
    return saved_catalog(stopped, tmp_path, templates={t.template_id: t for t in (CHAT, LLM)}).builder


def refusal(builder: Builder, **arguments: Any) -> str:
    with pytest.raises(AgentloomError) as caught:
        builder.build(**{**ARGS, **arguments})
    return str(caught.value)


def test_argument_refusals_word_for_word(builder: Builder) -> None:
    both = "give template_id or nodes (a list of node names), not both or neither."
    assert refusal(builder) == both
    assert refusal(builder, template_id="conversation-chain", nodes=["llmChain"]) == both
    assert refusal(builder, template_id="conversation-chain", name="  ") == (
        "name is empty; give the chatflow a name or leave it out."
    )
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
        "unknown Flowise node: chatOpenAI; use names from the node catalog"
    )


def test_a_template_is_found_by_id_name_or_flowise_id(builder: Builder) -> None:
    for given in ("conversation-chain", " conversation-chain ", "Conversation Chain", "7f0c"):
        assert builder.template(given) == CHAT, given
    assert builder.template("9a1b") == LLM
    with pytest.raises(AgentloomError, match=r"^template_id '7f0' unknown; flowise_search_templates finds one\.$"):
        builder.template("7f0")


def node(node_id: str, name: str, label: str | None = None, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "data": {"name": name, "label": label or name, **data}}


def test_credentials_name_each_node_that_needs_one() -> None:
    catalog: dict[str, dict[str, Any]] = {
        "chatOpenAI": {"credential": {"credentialNames": ["openAIApi"]}},
        "pinecone": {"credential": {"credentialNames": ["pineconeApi", "pineconeEnv"]}},
        "redisCache": {"credential": {"credentialNames": ["redisCacheApi"], "optional": True}},
        "bufferMemory": {},
    }
    flow = {
        "nodes": [
            node("chatOpenAI_0", "chatOpenAI"),
            node("pinecone_0", "pinecone"),
            node("redisCache_0", "redisCache"),
            node("bufferMemory_0", "bufferMemory"),
            # A node the catalog lacks: its own data says what it needs.
            node("oldNode_0", "oldNode", credential={"credentialNames": ["oldApi"]}),
        ]
    }
    assert attach(flow, catalog, [], []).missing == [
        "openAIApi for chatOpenAI_0",
        "pineconeApi|pineconeEnv for pinecone_0",
        "oldApi for oldNode_0",
    ]
    assert attach({"nodes": []}, catalog, [], []).missing == []
    assert (
        attach({}, catalog, [], []).missing == []
        and attach({"nodes": [{"id": "bare_0"}]}, catalog, [], []).missing == []
    )


def test_default_name_is_the_ending_node_and_the_count() -> None:
    flow = {
        "nodes": [
            node("chatOpenAI_0", "chatOpenAI", "ChatOpenAI"),
            node("bufferMemory_0", "bufferMemory", "Buffer Memory"),
            node("conversationChain_0", "conversationChain", "Conversation Chain"),
        ],
        "edges": [
            {"source": "chatOpenAI_0", "target": "conversationChain_0"},
            {"source": "bufferMemory_0", "target": "conversationChain_0"},
        ],
    }
    assert _default_name(flow) == "Conversation Chain (3 nodes)"
    alone = {"nodes": [node("llmChain_0", "llmChain", "LLM Chain")], "edges": []}
    assert _default_name(alone) == "LLM Chain (1 nodes)"


# -- create: the reply after Flowise's own /validation (a fake Flowise that ports it) -----------------


def param(name: str, label: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "string", **fields}


def flow_with_issues() -> dict[str, Any]:
    """Nodes whose /validation answer holds each kind of issue: credentials, settings to fill, other issues."""
    pinecone = node(
        "pinecone_0",
        "pinecone",
        "Pinecone",
        inputParams=[
            param("credential", "Connect Credential", type="credential"),
            param("pineconeIndex", "Pinecone Index"),
            param("namespace", "Namespace"),
            param("topK", "Top K", optional=True),
            param("tool", "Tool"),
        ],
        inputs={"credential": "", "pineconeIndex": "", "namespace": "", "tool": "keyedTool", "toolConfig": {"x": 1}},
    )
    memory = node("bufferMemory_0", "bufferMemory", "Buffer Memory", inputParams=[], inputs={})
    lonely = node("lonely_0", "lonely", "Lonely", inputParams=[param("key", "Key")], inputs={"key": ""})
    edges = [
        {"id": "e1", "source": "pinecone_0", "target": "bufferMemory_0"},
        {"id": "e2", "source": "pinecone_0", "target": "ghost_0"},
        {"id": "e3", "source": "pinecone_0", "target": "ghost_1"},
        {"id": "e4", "source": "ghost_2", "target": "ghost_3"},
    ]
    return {"nodes": [pinecone, memory, lonely], "edges": edges}


@pytest.fixture
def served(fake_flowise: FakeFlowise, tmp_path: Path) -> Builder:
    """A builder over a fresh catalog.json and a listening fake Flowise that knows ``keyedTool``, a tool
    needing a key."""
    fake_flowise.nodes.append(
        {
            "name": "keyedTool",
            "inputs": [{"name": "x", "label": "X", "optional": True}],
            "credential": {"credentialNames": ["keyApi"]},
        }
    )
    nodes = {
        "pinecone": {"name": "pinecone", "credential": {"credentialNames": ["pineconeApi"]}},
        "bufferMemory": {"name": "bufferMemory"},
    }
    return saved_catalog(fake_flowise, tmp_path, nodes).builder


def test_create_reply_splits_flowise_validation_into_fill_and_issues(
    served: Builder, fake_flowise: FakeFlowise
) -> None:
    flow = flow_with_issues()
    reply = served.create(flow, "My flow", missing=["conversationChain", "chatOpenAI"], warning="cache is old")
    chatflow_id = reply["chatflow_id"]
    assert reply == {
        "chatflow_id": chatflow_id,
        "name": "My flow",
        "credentials": ["pineconeApi for pinecone_0"],
        "fill": ["pinecone_0: Pinecone Index, Namespace", "lonely_0: Key"],
        "issues": [
            "not on this Flowise: conversationChain, chatOpenAI",
            "pinecone_0: Connected to non-existent target node ghost_0; Connected to non-existent target node ghost_1",
            "lonely_0: This node is not connected to anything",
            "e4: Disconnected edge - both source and target nodes do not exist",
        ],
        "warning": "cache is old",
    }
    saved = fake_flowise.chatflows[chatflow_id]
    assert (saved["name"], json.loads(saved["flowData"])) == ("My flow", flow)


def test_validation_alone(served: Builder) -> None:
    created = served.client.create_chatflow("v", flow_with_issues())
    fill, issues = served.blockers(created["id"])
    assert fill == ["pinecone_0: Pinecone Index, Namespace", "lonely_0: Key"]
    assert issues == [
        "pinecone_0: Connected to non-existent target node ghost_0; Connected to non-existent target node ghost_1",
        "lonely_0: This node is not connected to anything",
        "e4: Disconnected edge - both source and target nodes do not exist",
    ]


def test_a_clean_flow_gets_only_its_id_and_name(served: Builder) -> None:
    flow = {
        "nodes": [node("bufferMemory_0", "bufferMemory"), node("lonely_0", "lonely")],
        "edges": [{"id": "e1", "source": "bufferMemory_0", "target": "lonely_0"}],
    }
    reply = served.create(flow, "Clean", missing=[], warning=None)
    assert reply == {"chatflow_id": reply["chatflow_id"], "name": "Clean"}
    only_missing = served.create(flow, "Clean", missing=["llmChain"], warning="")
    assert only_missing == {
        "chatflow_id": only_missing["chatflow_id"],
        "name": "Clean",
        "issues": ["not on this Flowise: llmChain"],
    }
    assert only_missing["chatflow_id"] != reply["chatflow_id"]


# -- build and design over the real 3.1.2 catalog and marketplace --------------------------------------


def real_builder(fake: FakeFlowise, data: Path, catalog: dict[str, Any], **fields: Any) -> Builder:
    from agentloom.packs.flowise.catalog import _templates

    return saved_catalog(fake, data, catalog, _templates(fake.templates), **fields).builder


def stored(fake: FakeFlowise, reply: dict[str, Any]) -> dict[str, Any]:
    return json.loads(fake.chatflows[reply["chatflow_id"]]["flowData"])


def names_of(flow: dict[str, Any]) -> list[str]:
    return [n["data"]["name"] for n in flow["nodes"]]


def test_build_a_template_as_the_server_has_it(
    fake_flowise: FakeFlowise, tmp_path: Path, catalog: dict[str, Any]
) -> None:
    builder = real_builder(fake_flowise, tmp_path, catalog)
    tool_agent = builder.build(**{**ARGS, "template_id": "Tool Agent"})
    assert tool_agent == {
        "chatflow_id": tool_agent["chatflow_id"],
        "name": "Tool Agent",
        "credentials": ["serpApi for serpAPI_0", "openAIApi for chatOpenAI_0"],
    }
    assert names_of(stored(fake_flowise, tool_agent)) == [
        "calculator",
        "bufferMemory",
        "serpAPI",
        "chatOpenAI",
        "toolAgent",
    ]
    # csvAgent left Flowise's catalog: named, and what /validation says of it kept
    csv = builder.build(**{**ARGS, "template_id": "csv-agent", "name": "  My CSV  "})
    assert csv == {
        "chatflow_id": csv["chatflow_id"],
        "name": "My CSV",
        "credentials": ["openAIApi for chatOpenAI_0"],
        "fill": ["csvAgent_0: Csv File"],
        "issues": ["not on this Flowise: csvAgent"],
    }
    assert fake_flowise.chatflows[csv["chatflow_id"]]["name"] == "My CSV"


def test_build_names_every_missing_node_once_sorted(
    fake_flowise: FakeFlowise, tmp_path: Path, catalog: dict[str, Any]
) -> None:
    smaller = {k: v for k, v in catalog.items() if k not in ("bufferMemory", "chatOpenAI")}
    reply = real_builder(fake_flowise, tmp_path, smaller).build(**{**ARGS, "template_id": "prompt-chaining"})
    assert reply == {
        "chatflow_id": reply["chatflow_id"],
        "name": "Prompt Chaining",
        "issues": ["not on this Flowise: chatOpenAI"],
    }
    reply = real_builder(fake_flowise, tmp_path, smaller).build(**{**ARGS, "template_id": "conversation-chain"})
    assert reply == {
        "chatflow_id": reply["chatflow_id"],
        "name": "Conversation Chain",
        "issues": ["not on this Flowise: bufferMemory, chatOpenAI"],
    }


def test_build_from_node_names_and_each_customisation_alone(
    fake_flowise: FakeFlowise, tmp_path: Path, catalog: dict[str, Any]
) -> None:
    builder = real_builder(fake_flowise, tmp_path, catalog)
    names = ["chatOpenAI", "bufferMemory", "conversationChain"]
    planned = builder.build(**{**ARGS, "nodes": names})
    assert planned == {
        "chatflow_id": planned["chatflow_id"],
        "name": "Conversation Chain (3 nodes)",
        "credentials": ["openAIApi for chatOpenAI_0"],
    }
    flow = stored(fake_flowise, planned)
    assert names_of(flow) == names and "temperature" in flow["nodes"][0]["data"]["inputs"]
    warm = stored(fake_flowise, builder.build(**{**ARGS, "nodes": names, "temperature": 1.5}))
    assert warm["nodes"][0]["data"]["inputs"]["temperature"] == 1.5
    assert flow["nodes"][0]["data"]["inputs"]["temperature"] != 1.5
    claude = builder.build(**{**ARGS, "nodes": names, "model": "chatAnthropic", "name": "Claude"})
    assert claude["name"] == "Claude" and claude["credentials"] == ["anthropicApi for chatAnthropic_0"]
    assert names_of(stored(fake_flowise, claude)) == ["chatAnthropic", "bufferMemory", "conversationChain"]
    window = builder.build(**{**ARGS, "template_id": "conversation-chain", "memory_type": "bufferWindowMemory"})
    assert names_of(stored(fake_flowise, window)) == ["chatOpenAI", "bufferWindowMemory", "conversationChain"]
    with pytest.raises(AgentloomError) as caught:
        builder.build(**{**ARGS, "nodes": ["chatOpenAI", "conversationChain"]})
    assert str(caught.value) == "conversationChain needs a BaseMemory (memory): add a memory node such as bufferMemory"
    with pytest.raises(AgentloomError) as caught:
        builder.build(**{**ARGS, "template_id": "conversation-chain", "memory_type": "notAMemory"})
    assert "memory_type" in str(caught.value)
    assert len(fake_flowise.chatflows) == 4, "a refusal creates nothing"


def test_build_on_a_stale_catalog_warns_when_flowise_cannot_refresh_it(
    fake_flowise: FakeFlowise, tmp_path: Path, catalog: dict[str, Any]
) -> None:
    builder = real_builder(fake_flowise, tmp_path, catalog, refreshed_at=1_700_000_000.0)
    fake_flowise.fail_next(1, 503, path="/api/v1/nodes")
    reply = builder.build(**{**ARGS, "template_id": "conversation-chain"})
    assert reply == {
        "chatflow_id": reply["chatflow_id"],
        "name": "Conversation Chain",
        "credentials": ["openAIApi for chatOpenAI_0"],
        "warning": f"Flowise at {fake_flowise.url} failed (HTTP 503: Service Unavailable). Using the cached "
        "catalog from 2023-11-14T22:13:20.000Z.",
    }


def test_design_builds_a_stored_design_and_names_what_it_dropped(
    fake_flowise: FakeFlowise, tmp_path: Path, catalog: dict[str, Any]
) -> None:
    builder = real_builder(fake_flowise, tmp_path, catalog)
    design = {
        "nodes": ["chatOpenAI", "bufferMemory", "conversationChain"],
        "connections": [["chatOpenAI", "conversationChain"], ["bufferMemory", "conversationChain"]],
    }
    plain = builder.design(design, "Designed")
    assert plain == {
        "chatflow_id": plain["chatflow_id"],
        "name": "Designed",
        "credentials": ["openAIApi for chatOpenAI_0"],
    }
    noted = builder.design({**design, "config": {"chatOpenAI": {"temperature": 0.5, "nope": 1}}}, "Noted")
    assert noted == {
        "chatflow_id": noted["chatflow_id"],
        "name": "Noted",
        "credentials": ["openAIApi for chatOpenAI_0"],
        "notes": ["config chatOpenAI.nope: no such setting now"],
    }
    assert stored(fake_flowise, noted)["nodes"][0]["data"]["inputs"]["temperature"] == 0.5
    with pytest.raises(AgentloomError) as caught:
        builder.design({"nodes": ["chatOpenAI", "gone"]}, "Old")
    assert str(caught.value) == "design nodes not on this Flowise: gone; build a new design"
    stale = real_builder(fake_flowise, tmp_path, catalog, refreshed_at=1_700_000_000.0)
    fake_flowise.fail_next(1, 503, path="/api/v1/nodes")
    assert stale.design(design, "Late")["warning"].endswith("Using the cached catalog from 2023-11-14T22:13:20.000Z.")
    assert len(fake_flowise.chatflows) == 3


def test_default_name_without_an_ending_node_or_labels() -> None:
    unlabelled = {"id": "a_0", "data": {"name": "aNode"}}
    cycle = {
        "nodes": [unlabelled, node("b_0", "bNode", "B")],
        "edges": [{"source": "a_0", "target": "b_0"}, {"source": "b_0", "target": "a_0"}],
    }
    assert _default_name(cycle) == "aNode (2 nodes)"
    labelled = {**cycle, "nodes": [node("a_0", "aNode", "Alpha"), node("b_0", "bNode", "B")]}
    assert _default_name(labelled) == "Alpha (2 nodes)"
    assert _default_name({"nodes": [unlabelled, node("b_0", "bNode", "B")], "edges": [{"source": "b_0"}]}) == (
        "None (2 nodes)"
    ), "the ending node's label, even when it has none"
    assert _default_name({"nodes": [node("llmChain_0", "llmChain", "LLM Chain")]}) == "LLM Chain (1 nodes)", "no edges"


def test_a_template_id_is_looked_up_as_given_before_as_a_slug(tmp_path: Path) -> None:
    """Templates added from elsewhere (``data seed``) may carry ids that are no slug."""
    with FakeFlowise() as fake:
        pass
    odd = Template("My_Template", "", "My Template", "", [], [], {"nodes": [], "edges": []})
    builder = saved_catalog(fake, tmp_path, templates={"My_Template": odd, "llm-chain": LLM}).builder
    assert builder.template("My_Template") == odd
    assert builder.template("LLM Chain") == LLM


def test_a_planned_flow_the_checks_reject_is_refused_naming_its_first_two_problems(
    fake_flowise: FakeFlowise, tmp_path: Path, catalog: dict[str, Any]
) -> None:
    """Catalog keys that are not the definitions' own names: the planner wires them, but each node it writes is
    named as Flowise names it, which this catalog lacks; the checks (against this catalog) find one problem per
    node, the refusal names the first two, joined by '; ', and nothing is created."""
    renamed = {"myModel": "chatOpenAI", "myMemory": "bufferMemory", "myChain": "conversationChain"}
    odd = {k: v for k, v in catalog.items() if k not in renamed.values()}
    odd.update({key: catalog[name] for key, name in renamed.items()})
    builder = real_builder(fake_flowise, tmp_path, odd)
    with pytest.raises(AgentloomError) as caught:
        builder.build(**{**ARGS, "nodes": list(renamed)})
    assert str(caught.value) == (
        "no valid chatflow from these nodes: "
        "node myModel_0: chatOpenAI is not in the server's catalog; "
        "node myMemory_0: bufferMemory is not in the server's catalog"
    )
    assert fake_flowise.chatflows == {}, "a flow known to be broken is never created"
