"""The catalog against a fake Flowise built from a real server's answers: refresh diff, search, staleness."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from agentloom.core.breakers import BreakerRegistry
from agentloom.core.errors import AgentloomError, ConfigError, DependencyUnavailable
from agentloom.core.settings import Settings
from agentloom.embeddings import EmbeddingService
from agentloom.packs.flowise.settings import FlowiseSettings
from agentloom.packs.flowise.tools import Flowise
from tests.packs.flowise.fake_flowise import FakeFlowise

# A slice of the real catalog (embedding all 297 takes ~10 s): enough to search and build with.
SUBSET = {
    "chatOpenAI", "chatAnthropic", "bufferMemory", "bufferWindowMemory", "conversationChain", "llmChain",
    "promptTemplate", "chatPromptTemplate", "conversationalRetrievalQAChain", "memoryVectorStore", "faiss",
    "openAIEmbeddings", "pdfFile", "recursiveCharacterTextSplitter", "toolAgent", "calculator", "serpAPI",
    "conversationalAgent", "cheerioWebScraper", "csvFile", "RedisBackedChatMemory",
}


def trim(fake: FakeFlowise) -> FakeFlowise:
    fake.nodes = [n for n in fake.nodes if n["name"] in SUBSET]
    return fake


def open_flowise(fake: FakeFlowise, data: Path, breakers: BreakerRegistry | None = None, **settings: object) -> Flowise:
    breakers = breakers or BreakerRegistry()
    settings.setdefault("api_key", fake.api_key)
    folder = data / "flowise"
    folder.mkdir(parents=True, exist_ok=True)
    config = FlowiseSettings(url=fake.url, **settings)  # type: ignore[arg-type]
    return Flowise(config, folder, breakers, EmbeddingService(Settings(data_dir=data), breakers))


def test_refresh_counts_changes_and_search_finds_them(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    state = open_flowise(fake, tmp_path)
    first = state.catalog.refresh()
    assert (first["new"], first["nodes"], first["templates"]) == (len(SUBSET), len(SUBSET), 24)
    assert first["deprecated"] == 1 and first["server_version"] == "3.1.2"  # conversationalAgent
    again = state.catalog.refresh()
    assert again["skipped_fresh"] and again["new"] == 0, "younger than 24 h: nothing fetched"

    fake.node("chatOpenAI")["version"] = 9.0
    fake.node("pdfFile")["description"] = "Load data from PDF files, page by page"
    fake.node("bufferWindowMemory")["badge"] = "DEPRECATING"
    fake.nodes = [n for n in fake.nodes if n["name"] != "csvFile"]
    fake.nodes.append(json.loads(json.dumps(next(n for n in FakeFlowise().nodes if n["name"] == "jsonFile"))))
    changed = state.catalog.refresh(force=True)
    assert (changed["new"], changed["updated"], changed["removed"], changed["newly_deprecated"]) == (1, 3, 1, 1)
    assert changed["deprecated"] == 2

    reopened = open_flowise(fake, tmp_path)  # catalog.json and Chroma persist
    assert reopened.catalog.state().nodes["chatOpenAI"]["version"] == 9.0
    for template in fake.templates:
        template["id"] = str(uuid.uuid4())  # Flowise makes new template ids on every call: not a change
    unchanged = reopened.catalog.refresh(force=True)
    assert (unchanged["new"], unchanged["updated"], unchanged["templates_changed"]) == (0, 0, 0)
    names = [h["name"] for h in reopened.catalog.search_nodes("load a JSON file", None, 5)]
    assert "jsonFile" in names[:2] and "csvFile" not in names
    window = reopened.catalog.search_nodes("keep only the last k messages of the chat", "Memory", 5)
    flagged = [h for h in window if h["name"] == "bufferWindowMemory"]
    assert flagged and flagged[0]["deprecated"] is True
    assert all(h["category"] == "Memory" for h in window)


def test_search_categories_and_thresholds(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    state = open_flowise(trim(fake_flowise), tmp_path)
    state.catalog.refresh()
    hits = state.catalog.search_nodes("remember the conversation with the user", None, 3)
    assert hits and hits[0]["category"] == "Memory"
    assert set(hits[0]) <= {"name", "label", "category", "score", "deprecated"}
    assert state.catalog.search_nodes("split long text into chunks", "text splitters", 3)[0]["name"] == "recursiveCharacterTextSplitter"
    with pytest.raises(AgentloomError, match="category 'Robots' unknown; use one of: .*Chat Models"):
        state.catalog.search_nodes("anything", "Robots", 3)
    strict = open_flowise(fake_flowise, tmp_path, min_score=0.99)
    assert [h for h in strict.catalog.search_nodes("zebra migration patterns", "Chains", 5) if h["score"] >= 0.99] == []
    templates = state.catalog.search_templates("chat with an OpenAI model that remembers", 3)
    assert templates and templates[0][0].template_id in {"conversation-chain", "conversational-agent"}


def test_unreachable_server_keeps_the_cache_and_says_it_is_stale(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    state = open_flowise(fake, tmp_path)
    state.catalog.refresh()
    before = state.catalog.path.read_bytes()
    fake.stop()
    stale = state.catalog.refresh(force=True)
    assert stale["stale"] is True and "cached catalog" in stale["message"] and "AGENTLOOM_FLOWISE__URL" in stale["message"]
    assert state.catalog.path.read_bytes() == before
    assert state.catalog.search_nodes("a chat model from OpenAI", None, 3)[0]["name"] == "chatOpenAI"


def test_a_failure_halfway_through_a_refresh_changes_nothing(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    state = open_flowise(fake, tmp_path)
    state.catalog.refresh()
    before = state.catalog.path.read_bytes()
    fake.node("chatOpenAI")["version"] = 10.0
    # /nodes answers, then /marketplaces/templates fails: the half-fetched catalog is not kept.
    fake.fail_next(1, 502, path="/api/v1/marketplaces")
    calls = len(fake.requests)
    result = state.catalog.refresh(force=True)
    assert result["stale"] is True and len(fake.requests) > calls
    assert state.catalog.path.read_bytes() == before
    assert state.catalog.refresh(force=True)["updated"] == 1


def test_no_catalog_and_no_server_names_the_settings(tmp_path: Path) -> None:
    with FakeFlowise() as fake:
        pass  # stopped: its port refuses connections
    state = open_flowise(fake, tmp_path)
    with pytest.raises(DependencyUnavailable, match="AGENTLOOM_FLOWISE__URL"):
        state.catalog.refresh()
    with pytest.raises(AgentloomError, match="never reached.*AGENTLOOM_FLOWISE__URL"):
        state.catalog.search_nodes("memory", None, 3)


def test_wrong_catalog_path_and_wrong_key_are_named_and_not_counted(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    breakers = BreakerRegistry()
    html = open_flowise(fake_flowise, tmp_path, breakers, nodes_path="/api/v1/nodes-list")
    for _ in range(4):
        with pytest.raises(ConfigError, match="not JSON.*AGENTLOOM_FLOWISE__NODES_PATH"):
            html.catalog.refresh()
    bad_key = open_flowise(fake_flowise, tmp_path, breakers, api_key="wrong")
    for _ in range(4):
        with pytest.raises(ConfigError, match="refused the API key.*AGENTLOOM_FLOWISE__API_KEY"):
            bad_key.client.nodes()
    no_key = open_flowise(fake_flowise, tmp_path, breakers, api_key=None)
    with pytest.raises(ConfigError, match="needs an API key"):
        no_key.client.nodes()
    assert breakers.get("flowise").status().failures == 0


def test_hints_name_catalog_nodes_and_reach_search(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.hints import HINTS

    assert set(HINTS) <= {n["name"] for n in fake_flowise.nodes}, "a hint for a node Flowise 3.1.2 does not have"
    state = open_flowise(trim(fake_flowise), tmp_path)
    state.catalog.refresh()
    # Facts only the hints state: the definitions say "Load data from CSV files" and "...using Faiss library from Meta".
    assert state.catalog.search_nodes("rows of a spreadsheet saved as comma separated values", None, 3)[0]["name"] == "csvFile"
    assert "faiss" in [h["name"] for h in state.catalog.search_nodes("keep the index in a folder on disk", None, 3)]


def test_a_catalog_embedded_with_older_node_texts_is_rebuilt(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.documents import DOCUMENTS

    state = open_flowise(trim(fake_flowise), tmp_path)
    state.catalog.refresh()
    assert not state.catalog.is_stale()
    saved = json.loads(state.catalog.path.read_text())
    assert saved["documents"] == DOCUMENTS
    saved["documents"] = DOCUMENTS - 1  # as an older release wrote it
    state.catalog.path.write_text(json.dumps(saved))
    reopened = open_flowise(fake_flowise, tmp_path)
    assert reopened.catalog.is_stale(), "texts from another release: refreshed before the next search or build"
    again = reopened.catalog.refresh()
    assert again["new"] == len(SUBSET) and json.loads(reopened.catalog.path.read_text())["documents"] == DOCUMENTS
