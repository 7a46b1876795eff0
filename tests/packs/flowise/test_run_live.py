"""From a request to a chatflow that answers, against the real Flowise 3.1.2 and a model server on loopback that
speaks OpenAI's wire format (model_server.py): credentials, settings, updates, predictions and readiness."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.client import Client

from tests.packs.flowise import live
from tests.packs.flowise.journeys import SECRET, model_settings, run_journeys, stored_flow
from tests.packs.flowise.model_server import ANSWER_PREFIX, ModelServer, tiny_pdf
from tests.packs.flowise.test_live import served
from tests.packs.flowise.tokens import tokens
from tests.server.clients import call

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def openai_key(live_flowise: tuple[str, str]) -> Iterator[str]:
    """The user's one OpenAI credential (its key is any text: the loopback model takes it)."""
    with live.credential(live_flowise[0], "loopback OpenAI", "openAIApi", {"openAIApiKey": "sk-loopback"}) as found:
        yield found


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("flowise-run")


def validation(live_flowise: tuple[str, str], chatflow_id: str) -> list[dict]:
    url, key = live_flowise
    answer = httpx.get(f"{url}/api/v1/validation/{chatflow_id}", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    answer.raise_for_status()
    return answer.json()


async def test_six_requests_become_answering_chatflows(
    live_flowise: tuple[str, str], model: ModelServer, openai_key: str, data_dir: Path
) -> None:
    async with Client(served(data_dir, live_flowise).server) as client:
        await call(client, "flowise_refresh_catalog")
        journeys = await run_journeys(client, model, data_dir)
    assert [j.name for j in journeys] == [
        "conversation chain",
        "LLM chain with a prompt template",
        "tool agent with calculator",
        "retrieval QA over a text file",
        "template by id",
        "reused design",
    ]
    for journey in journeys:
        built = next(reply for tool, _, reply in journey.calls if "chatflow_id" in reply and tool != "flowise_predict")
        assert built["attached"] == [next(iter(built["attached"]))] and "(the only openAIApi)" in built["attached"][0]
        assert "credentials" not in built and "issues" not in built, (journey.name, built)
        assert journey.answer["text"].startswith(ANSWER_PREFIX), (journey.name, journey.answer)
        assert validation(live_flowise, journey.chatflow_id) == [], journey.name
        nodes = stored_flow(*live_flowise, journey.chatflow_id)["nodes"]
        models = [n["data"] for n in nodes if n["data"]["category"] == "Chat Models"]
        assert [(m["name"], m["credential"]) for m in models] == [("chatOpenAI", openai_key)], journey.name
    chain, llm, agent, rag, template, reused = journeys
    # The conversation went on in the same session: the model saw the first exchange.
    second = chain.calls[-1][2]
    assert chain.calls[-1][1]["session_id"] == chain.calls[-2][2]["session_id"] == second["session_id"]
    asked = next(b for b in model.seen("/v1/chat/completions") if b["messages"][-1]["content"] == "What is my name?")
    assert "Hello, I am Ada." in json.dumps(asked["messages"][:-1])
    assert llm.answer["text"] == f"{ANSWER_PREFIX} Answer in one sentence: Why is the sky blue?"
    assert agent.answer["tools"] == ["calculator"] and "84" in agent.answer["text"], agent.answer
    assert rag.answer["sources"] == ["handbook.txt"], rag.answer
    assert any(SECRET in json.dumps(body) for body in model.seen("/v1/chat/completions"))  # retrieved, then asked
    assert model.seen("/v1/embeddings")
    tested = next(reply for tool, _, reply in template.calls if tool == "flowise_test_flow")
    assert tested["ready"] is True and tested["answer"].startswith(ANSWER_PREFIX) and tokens(tested) < 100, tested
    names = sorted(n["data"]["name"] for n in stored_flow(*live_flowise, template.chatflow_id)["nodes"])
    assert "chatMistralAI" not in names and "documentStore" not in names and "memoryVectorStore" in names, names
    assert reused.answer["text"] == f"{ANSWER_PREFIX} Hi there"


async def test_node_lists_of_every_kind_pass_flowise_validation(
    live_flowise: tuple[str, str], model: ModelServer, openai_key: str, data_dir: Path
) -> None:
    """Issue 39: five of eight held-out node lists failed /validation on settings no argument could give."""
    manual = data_dir / "manual.pdf"
    manual.write_bytes(tiny_pdf("The warranty lasts 2 years."))
    page = model.page("faq", "Support answers within one day.")
    chat = model_settings(model)
    embeddings = {"basepath": model.base_path}
    retrieval = ["openAIEmbeddings", "memoryVectorStore", "chatOpenAI", "conversationalRetrievalQAChain"]
    cases = {
        "chat with memory": (
            ["chatOllama", "bufferMemory", "conversationChain"],
            {"chatOllama": {"modelName": "llama3.2"}},
        ),
        "tool agent": (
            ["chatOpenAI", "calculator", "currentDateTime", "bufferMemory", "toolAgent"],
            {"chatOpenAI": chat},
        ),
        "PDF QnA": (
            ["pdfFile", *retrieval],
            {
                "pdfFile": {"Pdf File": str(manual)},
                "openAIEmbeddings": embeddings,
                "chatOpenAI": chat,
                "conversationalRetrievalQAChain": {"Return Source Documents": True},
            },
        ),
        "LLM chain": (
            ["chatOpenAI", "promptTemplate", "llmChain"],
            {"chatOpenAI": chat, "Prompt Template": {"Template": "Summarise: {text}"}},
        ),
        "web page QnA": (
            ["cheerioWebScraper", *retrieval],
            {"Cheerio Web Scraper": {"URL": page}, "openAIEmbeddings": embeddings, "chatOpenAI": chat},
        ),
    }
    async with Client(served(data_dir, live_flowise).server) as client:
        await call(client, "flowise_refresh_catalog")
        built = {}
        for name, (nodes, settings) in cases.items():
            built[name] = await call(client, "flowise_build_flow", nodes=nodes, settings=settings)
            assert set(built[name]) <= {"chatflow_id", "name", "attached"}, (name, built[name])
            assert validation(live_flowise, built[name]["chatflow_id"]) == [], name
        pdf = await call(client, "flowise_predict", chatflow_id=built["PDF QnA"]["chatflow_id"], question="Warranty?")
        assert pdf["text"].startswith(ANSWER_PREFIX) and pdf["sources"] == ["manual.pdf"], pdf
        # Flowise refuses to scrape loopback addresses (its SSRF deny list): the test says so, briefly.
        scraped = await call(client, "flowise_test_flow", chatflow_id=built["web page QnA"]["chatflow_id"])
        assert scraped["ready"] is False and "denied" in scraped["blocks"][0] and tokens(scraped) < 100, scraped


async def test_test_flow_says_what_blocks_a_chatflow(
    live_flowise: tuple[str, str], model: ModelServer, openai_key: str, data_dir: Path
) -> None:
    async with Client(served(data_dir, live_flowise).server) as client:
        await call(client, "flowise_refresh_catalog")
        bare = await call(client, "flowise_build_flow", nodes=["chatAnthropic", "promptTemplate", "llmChain"])
        blocked = await call(client, "flowise_test_flow", chatflow_id=bare["chatflow_id"])
        assert blocked == {"ready": False, "blocks": ["chatAnthropic_0: credential", "promptTemplate_0: Template"]}
        unreachable = {"basepath": model.refusing_base_path, "streaming": False}
        broken = await call(
            client,
            "flowise_build_flow",
            nodes=["chatOpenAI", "bufferMemory", "conversationChain"],
            settings={"chatOpenAI": unreachable},
        )
        tested = await call(client, "flowise_test_flow", chatflow_id=broken["chatflow_id"])
        assert tested["ready"] is False and tested["blocks"][0].startswith("run: 401") and tokens(tested) < 100, tested
        fixed = await call(
            client,
            "flowise_update_chatflow",
            chatflow_id=broken["chatflow_id"],
            settings={"chatOpenAI": model_settings(model)},
        )
        assert fixed == {"chatflow_id": broken["chatflow_id"], "name": broken["name"]}
        ready = await call(client, "flowise_test_flow", chatflow_id=broken["chatflow_id"])
        assert ready == {"ready": True, "answer": f"{ANSWER_PREFIX} Hello"}
