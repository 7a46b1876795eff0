"""customise: templates changed (temperature, model, memory) and still sound."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloom.packs.flowise.customise import customise
from agentloom.packs.flowise.flowdata import check_flow, reference
from agentloom.packs.flowise.planner import PlanError, plan_flow
from tests.packs.flowise.fake_flowise import template
from tests.packs.flowise.test_planner import tokens


def node(flow: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in flow["nodes"] if n["id"] == node_id)


def refused(flow: dict[str, Any], catalog: dict[str, Any], **change: Any) -> str:
    with pytest.raises(PlanError) as caught:
        customise(flow, catalog, **change)
    message = str(caught.value)
    assert tokens(message) < 50, message
    return message


def test_temperature_sets_every_chat_model_and_nothing_else(catalog: dict[str, Any]) -> None:
    original = template("Prompt Chaining")
    flow = customise(original, catalog, temperature=0.2)
    assert check_flow(flow, catalog) == []
    assert [node(flow, i)["data"]["inputs"]["temperature"] for i in ("chatOpenAI_0", "chatOpenAI_1")] == [0.2, 0.2]
    assert node(original, "chatOpenAI_0")["data"]["inputs"]["temperature"] != 0.2  # the input is left alone
    for before, after in zip(original["nodes"], flow["nodes"]):
        if before["data"]["category"] != "Chat Models":
            assert before == after


def test_model_name_goes_into_the_existing_chat_model(catalog: dict[str, Any]) -> None:
    flow = customise(template("Tool Agent"), catalog, model="gpt-4o")
    assert check_flow(flow, catalog) == []
    assert node(flow, "chatOpenAI_0")["data"]["inputs"]["modelName"] == "gpt-4o"
    assert [n["id"] for n in flow["nodes"]] == [n["id"] for n in template("Tool Agent")["nodes"]]


def test_model_node_swap_repoints_edges_and_references(catalog: dict[str, Any]) -> None:
    original = template("Conversation Chain")
    flow = customise(original, catalog, model="chatAnthropic", temperature=0.5)
    assert check_flow(flow, catalog) == []
    assert "chatOpenAI_0" not in json.dumps(flow)
    swapped = node(flow, "chatAnthropic_0")
    assert swapped["position"] == node(original, "chatOpenAI_0")["position"]
    assert swapped["data"]["version"] == catalog["chatAnthropic"]["version"]
    assert swapped["data"]["inputs"]["temperature"] == 0.5
    assert node(flow, "conversationChain_0")["data"]["inputs"]["model"] == reference("chatAnthropic_0")
    edge = next(e for e in flow["edges"] if e["targetHandle"] == "conversationChain_0-input-model-BaseChatModel")
    assert edge["source"] == "chatAnthropic_0" and edge["sourceHandle"].startswith(
        "chatAnthropic_0-output-chatAnthropic-"
    )
    assert edge["id"].startswith("chatAnthropic_0-chatAnthropic_0-output-")


def test_model_swap_changes_every_chat_model_of_a_chained_flow(catalog: dict[str, Any]) -> None:
    flow = customise(template("Prompt Chaining"), catalog, model="chatMistralAI")
    assert check_flow(flow, catalog) == []
    assert sorted(n["id"] for n in flow["nodes"] if n["data"]["category"] == "Chat Models") == [
        "chatMistralAI_0",
        "chatMistralAI_1",
    ]
    chains = [n["data"]["inputs"]["model"] for n in flow["nodes"] if n["data"]["name"] == "llmChain"]
    assert sorted(chains) == [reference("chatMistralAI_0"), reference("chatMistralAI_1")]


def test_memory_swap_and_a_memory_that_needs_a_model(catalog: dict[str, Any]) -> None:
    flow = customise(template("Tool Agent"), catalog, memory_type="bufferWindowMemory")
    assert check_flow(flow, catalog) == []
    assert node(flow, "toolAgent_0")["data"]["inputs"]["memory"] == reference("bufferWindowMemory_0")
    assert not [n for n in flow["nodes"] if n["data"]["name"] == "bufferMemory"]

    summary = customise(template("Conversation Chain"), catalog, memory_type="conversationSummaryMemory")
    assert check_flow(summary, catalog) == []
    memory = node(summary, "conversationSummaryMemory_0")["data"]
    assert memory["inputs"]["model"] == reference("chatOpenAI_0")  # its own required input, fed by the flow

    back = customise(summary, catalog, memory_type="bufferMemory")  # takes no model: that edge goes
    assert check_flow(back, catalog) == []
    assert {(e["source"], e["target"]) for e in back["edges"]} == {
        ("chatOpenAI_0", "conversationChain_0"),
        ("bufferMemory_0", "conversationChain_0"),
    }


def test_memory_is_added_where_the_flow_has_none(catalog: dict[str, Any]) -> None:
    original = template("Local QnA")
    flow = customise(original, catalog, memory_type="bufferMemory")
    assert check_flow(flow, catalog) == []
    assert node(flow, "conversationalRetrievalQAChain_0")["data"]["inputs"]["memory"] == reference("bufferMemory_0")
    moved = [n["id"] for n, m in zip(flow["nodes"], original["nodes"]) if n["position"] != m["position"]]
    assert moved == []  # the template stays as it was; only the new node found its own place


def test_customise_keeps_a_planned_flow_sound(catalog: dict[str, Any]) -> None:
    planned = plan_flow(["chatOpenAI", "bufferMemory", "conversationChain"], catalog)
    flow = customise(planned, catalog, model="chatOllama", memory_type="conversationSummaryMemory", temperature=1)
    assert check_flow(flow, catalog) == []
    names = {n["data"]["name"] for n in flow["nodes"]}
    assert names == {"chatOllama", "conversationSummaryMemory", "conversationChain"}
    assert customise(json.dumps(planned), catalog, temperature=0) == customise(planned, catalog, temperature=0)


def test_bad_values_name_the_argument_and_choices(catalog: dict[str, Any]) -> None:
    conversation = template("Conversation Chain")
    assert "did you mean chatAnthropic" in refused(conversation, catalog, model="chatAntropic")
    assert "bufferMemory is a Memory node, not a chat model" in refused(conversation, catalog, model="bufferMemory")
    assert refused(conversation, catalog, temperature=5).startswith("temperature: 5 is not a number from 0 to 2")
    assert refused(conversation, catalog, temperature=True).startswith("temperature:")
    assert "try bufferMemory" in refused(conversation, catalog, memory_type="redis")
    llama = refused(template("Simple Chat Engine"), catalog, model="chatAnthropic")
    assert llama.startswith("model: chatAnthropic is not the BaseChatModel_LlamaIndex")
    assert "chatAnthropic_LlamaIndex" in llama
    assert "needs a BaseChatModel" in refused(
        template("Simple Chat Engine"), catalog, memory_type="conversationSummaryMemory"
    )
    assert "no free input" in refused(template("LLM Chain"), catalog, memory_type="bufferMemory")
    assert "no chat model or LLM" in refused(template("OpenAI Assistant"), catalog, model="gpt-4o")


def test_another_vendors_model_swaps_the_node_for_that_vendors(catalog: dict[str, Any]) -> None:
    """Issue 39: gpt-4o on the Mistral template became a chatMistralAI told to run gpt-4o."""
    flow = customise(template("Conversational Retrieval QA Chain"), catalog, model="gpt-4o")
    assert check_flow(flow, catalog) == []
    assert "chatMistralAI" not in json.dumps(flow)
    assert node(flow, "chatOpenAI_0")["data"]["inputs"]["modelName"] == "gpt-4o"
    for name, kind in (("claude-sonnet-4-5", "chatAnthropic"), ("llama3.1:8b", "chatOllama")):
        swapped = customise(template("Tool Agent"), catalog, model=name)
        assert check_flow(swapped, catalog) == []
        models = [n["data"] for n in swapped["nodes"] if n["data"]["category"] == "Chat Models"]
        assert [(m["name"], m["inputs"]["modelName"]) for m in models] == [(kind, name)]


def test_a_vendors_model_on_a_llamaindex_flow_keeps_the_framework(catalog: dict[str, Any]) -> None:
    original = template("SubQuestion Query Engine")  # two chatOpenAI_LlamaIndex
    flow = customise(original, catalog, model="claude-sonnet-4-5")
    assert check_flow(flow, catalog) == []
    models = [n["data"] for n in flow["nodes"] if n["data"]["category"] == "Chat Models"]
    assert [(m["name"], m["inputs"]["modelName"]) for m in models] == [
        ("chatAnthropic_LlamaIndex", "claude-sonnet-4-5")
    ] * 2
    message = refused(original, catalog, model="gemini-2.0-flash")
    assert "gemini-2.0-flash runs on chatGoogleGenerativeAI" in message and "chatOpenAI_LlamaIndex" in message


def test_gateways_and_unknown_names_keep_their_node(catalog: dict[str, Any]) -> None:
    azure = customise(template("LLM Chain"), catalog, model="gpt-4o")  # azureChatOpenAI serves OpenAI's models
    assert [n["data"]["name"] for n in azure["nodes"] if n["data"]["category"] == "Chat Models"] == ["azureChatOpenAI"]
    own = customise(template("Tool Agent"), catalog, model="my-finetune-v2")  # no vendor in the name
    assert node(own, "chatOpenAI_0")["data"]["inputs"]["modelName"] == "my-finetune-v2"


def test_settings_set_inputs_by_node_and_input_name_or_label(catalog: dict[str, Any]) -> None:
    from agentloom.packs.flowise.customise import apply_settings

    flow = plan_flow(["chatOpenAI", "promptTemplate", "llmChain"], catalog)
    apply_settings(
        flow,
        {
            "promptTemplate": {"Template": "Tell me a fact about {topic}"},  # a node name, an input label
            "chatOpenAI_0": {"modelName": "gpt-4o", "temperature": 0.3},  # a node id, input names
        },
    )
    assert check_flow(flow, catalog) == []
    assert node(flow, "promptTemplate_0")["data"]["inputs"]["template"] == "Tell me a fact about {topic}"
    assert node(flow, "chatOpenAI_0")["data"]["inputs"]["modelName"] == "gpt-4o"
    assert node(flow, "chatOpenAI_0")["data"]["inputs"]["temperature"] == 0.3


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"pineapple": {"x": 1}}, "settings: no node 'pineapple' in this flow; its nodes: chatOpenAI_0"),
        ({"chatOpenAI_0": {"colour": "red"}}, "settings.chatOpenAI_0: no input 'colour'; its inputs:"),
        ({"chatOpenAI_0": {"temperature": "hot"}}, "settings.chatOpenAI_0.temperature: expects a number, got 'hot'"),
        ({"chatOpenAI_0": {"streaming": "yes"}}, "settings.chatOpenAI_0.streaming: expects true or false"),
        ({"chatOpenAI_0": {"credential": "abc"}}, "credentials are attached by credential name"),
        ({"llmChain_0": {"model": "x"}}, "settings.llmChain_0.model: a connection, not a setting"),
        ({"chatOpenAI_0": "gpt-4o"}, 'settings.chatOpenAI_0: give its inputs as {"input": value}'),
    ],
)
def test_bad_settings_name_the_node_the_input_and_what_fits(
    catalog: dict[str, Any], settings: dict[str, Any], says: str
) -> None:
    from agentloom.packs.flowise.customise import apply_settings

    flow = plan_flow(["chatOpenAI", "promptTemplate", "llmChain"], catalog)
    with pytest.raises(PlanError) as caught:
        apply_settings(flow, settings)
    assert says in str(caught.value) and tokens(str(caught.value)) < 50, str(caught.value)
