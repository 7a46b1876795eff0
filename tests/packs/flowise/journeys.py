"""Six "request to answering chatflow" sessions, as an agent runs them through the pack's MCP tools.

Each journey starts from the user's words, searches, builds with settings, lets the only credential be
attached, and asks the chatflow a question; the model is ``ModelServer`` on loopback. The tests
(``test_run_live.py``) check the answers; ``python -m benchmarks flowise`` counts the tokens of every call.

Chat nodes are given ``streaming: false``: with streaming on, LangChain's ChatOpenAI.invoke (conversation and
LLM chains) first downloads a tokenizer vocabulary from the internet to estimate token counts, which on a
machine without internet waits for minutes. Agents stream and need no download (the tool agent keeps it on).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.client import Client

from tests.packs.flowise.model_server import ModelServer
from tests.server.clients import call

SECRET = "AMBER-42"


@dataclass
class Journey:
    name: str
    request: str
    question: str
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    @property
    def answer(self) -> dict[str, Any]:
        return next(reply for tool, _, reply in reversed(self.calls) if tool == "flowise_predict")

    @property
    def chatflow_id(self) -> str:
        return str(self.answer_args["chatflow_id"])

    @property
    def answer_args(self) -> dict[str, Any]:
        return next(args for tool, args, _ in reversed(self.calls) if tool == "flowise_predict")


class Agent:
    """Calls tools on ``client`` and keeps each call of the current journey."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.journey: Journey | None = None

    async def __call__(self, tool: str, **args: Any) -> dict[str, Any]:
        reply = await call(self.client, tool, **args)
        assert self.journey is not None
        self.journey.calls.append((tool, args, reply))
        return reply


def model_settings(model: ModelServer, streaming: bool = False) -> dict[str, Any]:
    return {"basepath": model.base_path, "modelName": "gpt-4o-mini", "streaming": streaming}


async def run_journeys(client: Client, model: ModelServer, files: Path) -> list[Journey]:
    agent = Agent(client)
    chat = model_settings(model)
    embeddings = {"basepath": model.base_path}
    handbook = files / "handbook.txt"
    handbook.write_text(f"Returns are accepted for 30 days.\nThe staff discount code is {SECRET}.\n", encoding="utf-8")
    journeys = []

    async def journey(name: str, request: str, question: str) -> Journey:
        agent.journey = Journey(name, request, question)
        journeys.append(agent.journey)
        return agent.journey

    # 1. A conversation chain from node names.
    j = await journey("conversation chain", "a chatbot that remembers what I said", "Hello, I am Ada.")
    hits = await agent("flowise_search_nodes", query="remember the conversation", category="Memory", limit=5)
    memory = next(h["name"] for h in hits["results"] if h["name"] == "bufferMemory")  # what a chain takes
    built = await agent(
        "flowise_build_flow", nodes=["chatOpenAI", memory, "conversationChain"], settings={"chatOpenAI": chat}
    )
    first = await agent("flowise_predict", chatflow_id=built["chatflow_id"], question=j.question)
    await agent(
        "flowise_predict", chatflow_id=built["chatflow_id"], question="What is my name?", session_id=first["session_id"]
    )

    # 2. An LLM chain with a prompt template.
    j = await journey(
        "LLM chain with a prompt template", "answer questions in one short sentence", "Why is the sky blue?"
    )
    built = await agent(
        "flowise_build_flow",
        nodes=["chatOpenAI", "promptTemplate", "llmChain"],
        settings={"chatOpenAI": chat, "promptTemplate": {"template": "Answer in one sentence: {question}"}},
    )
    await agent("flowise_predict", chatflow_id=built["chatflow_id"], question=j.question)

    # 3. A tool agent with a calculator (agents stream: the loopback server answers server-sent events).
    j = await journey("tool agent with calculator", "an assistant that can do arithmetic", "What is 12 * 7?")
    tools = await agent("flowise_search_nodes", query="do arithmetic", category="Tools", limit=3)
    calculator = next(h["name"] for h in tools["results"] if "calc" in h["name"].lower())
    built = await agent(
        "flowise_build_flow",
        nodes=["chatOpenAI", calculator, "bufferMemory", "toolAgent"],
        settings={"chatOpenAI": model_settings(model, streaming=True)},
    )
    await agent("flowise_predict", chatflow_id=built["chatflow_id"], question=j.question)

    # 4. Retrieval QA over a text file.
    j = await journey("retrieval QA over a text file", "answer questions from our staff handbook", "What is the code?")
    await agent("flowise_search_nodes", query="load a text file", limit=3)
    built = await agent(
        "flowise_build_flow",
        nodes=["textFile", "openAIEmbeddings", "memoryVectorStore", "chatOpenAI", "conversationalRetrievalQAChain"],
        settings={
            "textFile": {"txtFile": str(handbook)},
            "openAIEmbeddings": embeddings,
            "chatOpenAI": chat,
            "conversationalRetrievalQAChain": {"returnSourceDocuments": True},
        },
    )
    await agent("flowise_predict", chatflow_id=built["chatflow_id"], question=j.question)

    # 5. A template by id: the Mistral retrieval template on gpt-4o, its FAISS store swapped for one in memory.
    j = await journey("template by id", "a PDF-style QnA bot with OpenAI over my handbook", "What is the code?")
    found = await agent("flowise_search_templates", query="chat with documents using retrieval QA", limit=3)
    template_id = next(t["template_id"] for t in found["results"] if t["template_id"].startswith("conversational-ret"))
    built = await agent(
        "flowise_build_flow",
        template_id=template_id,
        model="gpt-4o",
        settings={"chatOpenAI": chat, "openAIEmbeddings": embeddings, "textFile": {"txtFile": str(handbook)}},
    )
    await agent(
        "flowise_update_chatflow",
        chatflow_id=built["chatflow_id"],
        swap={"faiss_0": "memoryVectorStore"},
        remove=["documentStore_0"],
    )
    await agent("flowise_test_flow", chatflow_id=built["chatflow_id"])
    await agent("flowise_predict", chatflow_id=built["chatflow_id"], question=j.question)

    # 6. A reused design: saved once, found by a similar request, built again and answering.
    j = await journey("reused design", "a friendly support chatbot that keeps context", "Hi there")
    design = {
        "nodes": ["chatOpenAI", "bufferWindowMemory", "conversationChain"],
        "connections": [["chatOpenAI", "conversationChain"], ["bufferWindowMemory", "conversationChain"]],
        "config": {"chatOpenAI": chat},
    }
    saved = await agent(
        "flowise_save_artifact",
        request="a support chatbot that keeps the context of the conversation",
        spec="chat with memory",
        plan="model, window memory, conversation chain",
        tasks="build; test",
        design=design,
    )
    offers = await agent("flowise_find_design", request=j.request)
    assert offers["designs"] and offers["designs"][0]["artifact_id"] == saved["artifact_id"], offers
    built = await agent("flowise_reuse_design", artifact_id=saved["artifact_id"], approve=True)
    await agent("flowise_predict", chatflow_id=built["chatflow_id"], question=j.question)
    return journeys


def stored_flow(url: str, key: str, chatflow_id: str) -> dict[str, Any]:
    import httpx

    answer = httpx.get(f"{url}/api/v1/chatflows/{chatflow_id}", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    answer.raise_for_status()
    return json.loads(answer.json()["flowData"])


__all__ = ["SECRET", "Journey", "model_settings", "run_journeys", "stored_flow"]
