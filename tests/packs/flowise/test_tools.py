"""The flowise pack served through a real MCP client, against a fake Flowise built from a real server's answers."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from mcp.client import Client

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from tests.packs.flowise.fake_flowise import FakeFlowise
from tests.packs.flowise.test_catalog import trim
from tests.packs.flowise.tokens import tokens
from tests.server.clients import call, error

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

FLOWISE_EP = EntryPoint(name="flowise", value="agentloom.packs.flowise:pack", group="agentloom.packs")
TOOLS = {
    "flowise_search_nodes",
    "flowise_search_templates",
    "flowise_build_flow",
    "flowise_refresh_catalog",
    "flowise_list_chatflows",
    "flowise_delete_chatflow",
}


def host(tmp_path: Path, fake: FakeFlowise, **pack_settings: object) -> Host:
    pack_settings.setdefault("url", fake.url)
    pack_settings.setdefault("api_key", fake.api_key)
    settings = Settings(data_dir=tmp_path / "data", packs=["core", "flowise"], pack_settings={"flowise": pack_settings})
    core = EntryPoint(name="core", value="agentloom.packs.core:pack", group="agentloom.packs")
    return Host(settings, [core, FLOWISE_EP])


def stored_flow(fake: FakeFlowise, chatflow_id: str) -> dict:
    return json.loads(fake.chatflows[chatflow_id]["flowData"])


@pytest.mark.slow
async def test_search_build_list_delete(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    served = host(tmp_path, fake)
    async with Client(served.server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert TOOLS <= set(listed)
        assert (
            listed["flowise_search_nodes"].annotations is not None
            and listed["flowise_search_nodes"].annotations.read_only_hint is True
        )
        assert (
            listed["flowise_delete_chatflow"].annotations is not None
            and listed["flowise_delete_chatflow"].annotations.destructive_hint is True
        )

        updates: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append(progress)

        result = await client.call_tool("flowise_refresh_catalog", {"force": True}, progress_callback=on_progress)
        assert not result.is_error and result.structured_content["new"] == len(fake.nodes)
        assert updates and updates[-1] == len(fake.nodes) + 24

        nodes = await call(client, "flowise_search_nodes", query="remember earlier messages of the chat")
        assert nodes["results"][0]["category"] == "Memory"
        for hit in nodes["results"]:
            assert tokens(hit) < 50, hit
        templates = await call(client, "flowise_search_templates", query="a simple chatbot with memory", limit=3)
        assert templates["results"][0]["template_id"] == "conversation-chain"
        for hit in templates["results"]:
            assert tokens(hit) < 50, hit

        built = await call(client, "flowise_build_flow", template_id="conversation-chain", temperature=0.2)
        assert set(built) <= {"chatflow_id", "name", "credentials", "fill", "issues", "warning"}
        # Flowise's UUID alone is 24 tokens, so the "< 30" cannot hold; the rest stays small.
        assert tokens({"chatflow_id": built["chatflow_id"], "name": built["name"]}) - tokens(built["chatflow_id"]) <= 12
        assert "issues" not in built, built  # Flowise's validation found nothing but credentials
        assert built["credentials"] == ["openAIApi for chatOpenAI_0"]
        flow = stored_flow(fake, built["chatflow_id"])
        model = next(n for n in flow["nodes"] if n["data"]["name"] == "chatOpenAI")
        assert model["data"]["inputs"]["temperature"] == 0.2

        planned = await call(
            client,
            "flowise_build_flow",
            nodes=["chatAnthropic", "bufferMemory", "conversationChain"],
            name="Claude chat",
        )
        assert planned["name"] == "Claude chat" and "issues" not in planned
        edges = {(e["source"], e["target"]) for e in stored_flow(fake, planned["chatflow_id"])["edges"]}
        assert edges == {("chatAnthropic_0", "conversationChain_0"), ("bufferMemory_0", "conversationChain_0")}

        listing = await call(client, "flowise_list_chatflows")
        assert listing["count"] == 2 and {c["id"] for c in listing["chatflows"]} == {
            built["chatflow_id"],
            planned["chatflow_id"],
        }
        assert (await call(client, "flowise_delete_chatflow", id=built["chatflow_id"]))["deleted"] == built[
            "chatflow_id"
        ]
        gone = await error(client, "flowise_delete_chatflow", id=built["chatflow_id"])
        assert "not found" in gone and "flowise_list_chatflows" in gone
        assert "not a chatflow id" in await error(client, "flowise_delete_chatflow", id="abc")
        await error(client, "flowise_build_flow", nodes=["bufferMemory"], request="just a memory")
    sessions = served.packs["flowise"].state.learning.collection("sessions").get(include=["metadatas", "documents"])
    records = sorted(
        zip(
            sessions["documents"],
            (m["outcome"] for m in sessions["metadatas"]),
            (m["chatflow_id"] for m in sessions["metadatas"]),
        )
    )
    assert records == sorted(
        [
            ("template conversation-chain", "created", built["chatflow_id"]),
            ("nodes chatAnthropic, bufferMemory, conversationChain", "created", planned["chatflow_id"]),
            ("just a memory", "failed", ""),
        ]
    )


@pytest.mark.slow
async def test_build_refusals_are_short_and_create_nothing(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    async with Client(host(tmp_path, fake).server) as client:
        await call(client, "flowise_refresh_catalog")
        refusals = [
            await error(client, "flowise_build_flow", nodes=["bufferMemory", "chatOpenAI"]),  # no ending node
            await error(client, "flowise_build_flow", nodes=["conversationalRetrievalQAChain", "chatOpenAI"]),
            await error(client, "flowise_build_flow", nodes=["chatOpenAI", "noSuchNode", "llmChain"]),
            await error(client, "flowise_build_flow", template_id="no-such-template"),
            await error(client, "flowise_build_flow"),
            await error(client, "flowise_build_flow", template_id="llm-chain", nodes=["llmChain"]),
            await error(client, "flowise_build_flow", template_id="llm-chain", temperature=7),
            await error(client, "flowise_build_flow", template_id="llm-chain", memory_type="notAMemory"),
        ]
        for text in refusals:
            assert tokens(text) < 50, text
        assert "noSuchNode" in refusals[2]
        assert "flowise_search_templates" in refusals[3]
        assert "template_id or nodes" in refusals[4]
        assert "temperature" in refusals[6]
        assert "memory_type" in refusals[7]
        unknown = await error(client, "flowise_build_flow", template_id="llm-chain", flowData="{}")
        assert "flowData" in unknown
    assert fake.chatflows == {}


@pytest.mark.slow
async def test_flowise_down_answers_from_the_cache_and_breaker_opens(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    async with Client(host(tmp_path, fake).server) as client:
        await call(client, "flowise_refresh_catalog")
        fake.stop()
        assert (await call(client, "flowise_search_nodes", query="a chat model by Anthropic"))["results"][0][
            "name"
        ] == "chatAnthropic"
        messages = [await error(client, "flowise_list_chatflows") for _ in range(3)]
        assert all("unreachable" in m and "AGENTLOOM_FLOWISE__URL" in m for m in messages)
        opened = await error(client, "flowise_build_flow", template_id="llm-chain")
        assert "circuit open" in opened and "retry in" in opened and tokens(opened) < 50, opened
        health = await call(client, "health")
        flowise = next(b for b in health["breakers"] if b["name"] == "flowise")
        assert flowise["state"] == "open"
        fake.start()
        await call(client, "breaker_reset", name="flowise")
        assert (await call(client, "flowise_list_chatflows"))["count"] == 0


def test_entry_point_is_discovered() -> None:
    found = [ep for ep in discover_packs() if ep.name == "flowise"]
    assert found and found[0].value == "agentloom.packs.flowise:pack"


@pytest.mark.parametrize("query", ["", "   "])
async def test_empty_query_is_refused(fake_flowise: FakeFlowise, tmp_path: Path, query: str) -> None:
    async with Client(host(tmp_path, trim(fake_flowise)).server) as client:
        assert "query" in await error(client, "flowise_search_nodes", query=query)


async def test_a_model_of_another_vendor_builds_that_vendors_chat_node(
    fake_flowise: FakeFlowise, tmp_path: Path
) -> None:
    """Issue 39: the Mistral template with model="gpt-4o" saved a chatMistralAI_0 told to run gpt-4o."""
    served = host(tmp_path, trim(fake_flowise))
    async with Client(served.server) as client:
        built = await call(
            client, "flowise_build_flow", template_id="conversational-retrieval-qa-chain", model="gpt-4o"
        )
        assert "openAIApi for chatOpenAI_0" in built["credentials"], built
        assert not any("mistral" in c.lower() for c in built["credentials"]), built
        flow = stored_flow(fake_flowise, built["chatflow_id"])
        models = [n["data"] for n in flow["nodes"] if n["data"]["category"] == "Chat Models"]
        assert [(m["name"], m["inputs"]["modelName"]) for m in models] == [("chatOpenAI", "gpt-4o")]


async def test_settings_at_build_time_fill_what_no_argument_could(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    served = host(tmp_path, trim(fake_flowise))
    async with Client(served.server) as client:
        bare = await call(client, "flowise_build_flow", nodes=["chatOpenAI", "promptTemplate", "llmChain"])
        assert any(f.startswith("promptTemplate_0") for f in bare.get("fill", [])), bare
        settled = await call(
            client,
            "flowise_build_flow",
            nodes=["chatOpenAI", "promptTemplate", "llmChain"],
            settings={"Prompt Template": {"Template": "Tell me about {topic}"}, "chatOpenAI": {"modelName": "gpt-4o"}},
        )
        assert not any(f.startswith("promptTemplate_0") for f in settled.get("fill", [])), settled
        flow = stored_flow(fake_flowise, settled["chatflow_id"])
        prompt = next(n for n in flow["nodes"] if n["id"] == "promptTemplate_0")
        assert prompt["data"]["inputs"]["template"] == "Tell me about {topic}"
        count = len(fake_flowise.chatflows)
        refusal = await error(
            client,
            "flowise_build_flow",
            nodes=["chatOpenAI", "promptTemplate", "llmChain"],
            settings={"chatOpenAI": {"temperature": "hot"}},
        )
        assert "settings.chatOpenAI_0.temperature: expects a number, got 'hot'" in refusal
        assert len(fake_flowise.chatflows) == count  # a refused build creates nothing
