"""The catalog against a fake Flowise built from a real server's answers: refresh diff, search, staleness."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agentloom.core.breakers import BreakerRegistry
from agentloom.core.errors import AgentloomError, ConfigError, DependencyUnavailable
from agentloom.core.settings import Settings
from agentloom.core.timestamps import iso
from agentloom.embeddings import EmbeddingService
from agentloom.packs.flowise.settings import FlowiseSettings
from agentloom.packs.flowise.tools import Flowise
from tests.conftest import REPO
from tests.packs.flowise.fake_flowise import FakeFlowise

if TYPE_CHECKING:
    from agentloom.packs.flowise.catalog import Catalog

# A slice of the real catalog (embedding all 297 takes ~10 s): enough to search and build with.
SUBSET = {
    "chatOpenAI",
    "chatAnthropic",
    "bufferMemory",
    "bufferWindowMemory",
    "conversationChain",
    "llmChain",
    "promptTemplate",
    "chatPromptTemplate",
    "conversationalRetrievalQAChain",
    "memoryVectorStore",
    "faiss",
    "openAIEmbeddings",
    "pdfFile",
    "recursiveCharacterTextSplitter",
    "toolAgent",
    "calculator",
    "serpAPI",
    "conversationalAgent",
    "cheerioWebScraper",
    "csvFile",
    "RedisBackedChatMemory",
}


def trim(fake: FakeFlowise) -> FakeFlowise:
    fake.nodes = [n for n in fake.nodes if n["name"] in SUBSET]
    return fake


def open_flowise(fake: FakeFlowise, data: Path, breakers: BreakerRegistry | None = None, **settings: Any) -> Flowise:
    breakers = breakers or BreakerRegistry()
    settings.setdefault("api_key", fake.api_key)
    folder = data / "flowise"
    folder.mkdir(parents=True, exist_ok=True)
    config = FlowiseSettings(url=fake.url, **settings)
    return Flowise(config, folder, breakers, EmbeddingService(Settings(data_dir=data), breakers))


@pytest.mark.slow
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


@pytest.mark.slow
def test_search_categories_and_thresholds(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    state = open_flowise(trim(fake_flowise), tmp_path)
    state.catalog.refresh()
    hits = state.catalog.search_nodes("remember the conversation with the user", None, 3)
    assert hits and hits[0]["category"] == "Memory"
    assert set(hits[0]) <= {"name", "label", "category", "score", "deprecated"}
    assert (
        state.catalog.search_nodes("split long text into chunks", "text splitters", 3)[0]["name"]
        == "recursiveCharacterTextSplitter"
    )
    with pytest.raises(AgentloomError, match="category 'Robots' unknown; use one of: .*Chat Models"):
        state.catalog.search_nodes("anything", "Robots", 3)
    strict = open_flowise(fake_flowise, tmp_path, min_score=0.99)
    assert [h for h in strict.catalog.search_nodes("zebra migration patterns", "Chains", 5) if h["score"] >= 0.99] == []
    templates = state.catalog.search_templates("chat with an OpenAI model that remembers", 3)
    assert templates and templates[0][0].template_id in {"conversation-chain", "conversational-agent"}


@pytest.mark.slow
def test_unreachable_server_keeps_the_cache_and_says_it_is_stale(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    state = open_flowise(fake, tmp_path)
    state.catalog.refresh()
    before = state.catalog.path.read_bytes()
    fake.stop()
    stale = state.catalog.refresh(force=True)
    assert (
        stale["stale"] is True and "cached catalog" in stale["message"] and "AGENTLOOM_FLOWISE__URL" in stale["message"]
    )
    assert state.catalog.path.read_bytes() == before
    assert state.catalog.search_nodes("a chat model from OpenAI", None, 3)[0]["name"] == "chatOpenAI"


@pytest.mark.slow
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


@pytest.mark.slow
def test_hints_name_catalog_nodes_and_reach_search(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.hints import HINTS

    assert set(HINTS) <= {n["name"] for n in fake_flowise.nodes}, "a hint for a node Flowise 3.1.2 does not have"
    state = open_flowise(trim(fake_flowise), tmp_path)
    state.catalog.refresh()
    # Facts only the hints state: the definitions say "Load data from CSV files" and "...using Faiss library from Meta".
    assert (
        state.catalog.search_nodes("rows of a spreadsheet saved as comma separated values", None, 3)[0]["name"]
        == "csvFile"
    )
    assert "faiss" in [h["name"] for h in state.catalog.search_nodes("keep the index in a folder on disk", None, 3)]


@pytest.mark.slow
def test_a_catalog_embedded_with_older_node_texts_is_rebuilt(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.documents import DOCUMENTS

    state = open_flowise(trim(fake_flowise), tmp_path)
    state.catalog.refresh()
    assert not state.catalog.is_stale()
    saved = json.loads(state.catalog.path.read_text())
    assert saved["documents"] == DOCUMENTS
    saved["documents"] = "1"  # as an older release wrote it
    state.catalog.path.write_text(json.dumps(saved))
    reopened = open_flowise(fake_flowise, tmp_path)
    assert reopened.catalog.is_stale(), "texts from another release: refreshed before the next search or build"
    again = reopened.catalog.refresh()
    assert again["new"] == len(SUBSET) and json.loads(reopened.catalog.path.read_text())["documents"] == DOCUMENTS


# -- the pure parts and the cheap paths: no embedding (each test well under a second) ----------------

MODEL = "all-MiniLM-L6-v2"  # the default model's key


def saved_catalog(
    fake: FakeFlowise,
    data: Path,
    nodes: dict | None = None,
    templates: dict | None = None,
    settings: dict | None = None,
    **fields: object,
) -> Flowise:
    """A Flowise state over a catalog.json written here (refreshed a minute ago by default): nothing embedded."""
    from dataclasses import asdict

    from agentloom.packs.flowise.catalog import CatalogState
    from agentloom.packs.flowise.documents import DOCUMENTS

    state = open_flowise(fake, data, **(settings or {}))
    values: dict = {
        "refreshed_at": time.time() - 60,
        "server_version": "3.1.2",
        "url": fake.url,
        "model": MODEL,
        "nodes": nodes or {},
        "templates": templates or {},
        "documents": DOCUMENTS,
        **fields,
    }
    state.catalog.path.write_text(json.dumps(asdict(CatalogState(**values))))
    return state


def test_slug_keeps_lowercase_words_and_digits_joined_by_dashes() -> None:
    from agentloom.packs.flowise.catalog import slug

    assert slug("Conversation Chain") == "conversation-chain"
    assert slug("  -- OpenAI: Chat v2 (GPT-4o)!! ") == "openai-chat-v2-gpt-4o"
    assert slug("RAG___with  PDF") == "rag-with-pdf"
    assert slug("") == ""


def test_fingerprint_ignores_file_paths_and_key_order_only() -> None:
    import hashlib

    from agentloom.packs.flowise.catalog import _fingerprint

    definition = {"name": "chatOpenAI", "version": 8.2, "inputs": [{"name": "temperature"}]}
    expected = hashlib.sha256(
        b'{"inputs": [{"name": "temperature"}], "name": "chatOpenAI", "version": 8.2}'
    ).hexdigest()[:16]
    assert _fingerprint(definition) == expected and len(expected) == 16
    assert _fingerprint({"version": 8.2, "inputs": [{"name": "temperature"}], "name": "chatOpenAI"}) == expected
    assert _fingerprint({**definition, "filePath": "/usr/src/a.js", "icon": "/usr/src/a.svg"}) == expected
    assert _fingerprint({**definition, "filePath": "/usr/src/a.js", "badge": "DEPRECATING"}) != expected
    assert _fingerprint({**definition, "version": 8.3}) != expected


def test_newest_keeps_one_definition_per_name_the_highest_version() -> None:
    from agentloom.packs.flowise.catalog import _newest

    nodes: list[dict[str, Any]] = [
        {"label": "no name"},
        {"name": ""},
        {"name": 7},  # skipped, and what follows still counts
        {"name": "a", "version": 1, "tag": "a1"},
        {"name": "a", "version": "2", "tag": "a2"},
        {"name": "a", "version": 1.5, "tag": "a1.5"},
        {"name": "b", "version": 3, "tag": "b3"},
        {"name": "b", "version": 3, "tag": "b3-later"},  # a tie: the later
        {"name": "c", "version": 0.5, "tag": "c0.5"},
        {"name": "c", "tag": "c-none"},  # no version: 0
        {"name": "d", "tag": "d-none"},
        {"name": "d", "version": 0.5, "tag": "d0.5"},
        {"name": "e", "version": None, "tag": "e-none"},
    ]
    assert {name: node["tag"] for name, node in _newest(nodes).items()} == {
        "a": "a2",
        "b": "b3-later",
        "c": "c0.5",
        "d": "d0.5",
        "e": "e-none",
    }
    assert _newest([]) == {}


def chatflow_template(name: str, *node_names: str, kind: str = "Chatflow", **item: object) -> dict:
    nodes = [{"id": f"{n}_0", "data": {"name": n, "label": n.title()}} for n in node_names]
    return {
        "templateName": name,
        "type": kind,
        "id": f"id-{name}",
        "flowData": json.dumps({"nodes": nodes, "edges": [{"source": "x", "target": "y"}]}),
        **item,
    }


def test_templates_keep_readable_chatflows_only(caplog: pytest.LogCaptureFixture) -> None:
    from agentloom.packs.flowise.catalog import Template, _templates

    answer = [
        chatflow_template("An Agentflow", "agentAgentflow", kind="AgentflowV2"),  # skipped, the rest still read
        chatflow_template("A Tool", "customTool", kind="Tool"),
        {"templateName": "No Flow", "type": "Chatflow"},
        {"templateName": "Null Flow", "type": "Chatflow", "flowData": None},
        {"templateName": "Broken Flow", "type": "Chatflow", "flowData": "{nodes"},
        chatflow_template(
            "Conversation Chain",
            "chatOpenAI",
            "stickyNote",
            "bufferMemory",
            kind="CHATFLOW",
            description="Chat with memory",
            usecases=["Chatbot"],
        ),
        {
            "name": "Dict Flow",
            "type": "Chatflow",
            "flowData": {"description": "from the flow", "nodes": [{"id": "n"}, {"data": {"name": "llmChain"}}]},
        },
        {"id": 42, "type": "Chatflow", "flowData": "{}"},
    ]
    with caplog.at_level("WARNING", logger="agentloom.packs.flowise.catalog"):
        found = _templates(answer)
    assert [r.getMessage() for r in caplog.records] == [
        f"flowise: template {name!r} has no readable flowData; skipped"
        for name in ("No Flow", "Null Flow", "Broken Flow")
    ]
    assert list(found) == ["conversation-chain", "dict-flow", "42"]
    chat = found["conversation-chain"]
    assert chat == Template(
        "conversation-chain",
        "id-Conversation Chain",
        "Conversation Chain",
        "Chat with memory",
        ["Chatbot"],
        ["chatOpenAI", "bufferMemory"],
        {
            "nodes": json.loads(answer[5]["flowData"])["nodes"],
            "edges": [{"source": "x", "target": "y"}],
        },
    )
    assert found["dict-flow"] == Template(
        "dict-flow",
        "",
        "Dict Flow",
        "from the flow",
        [],
        ["llmChain"],
        {"nodes": [{"id": "n"}, {"data": {"name": "llmChain"}}], "edges": []},
    )
    assert found["42"] == Template("42", "42", "42", "", [], [], {"nodes": [], "edges": []})


def test_same_template_ignores_only_the_flowise_id() -> None:
    from dataclasses import replace

    from agentloom.packs.flowise.catalog import Template, _same_template

    one = Template("t", "id-1", "T", "about", ["Chatbot"], ["llmChain"], {"nodes": [], "edges": []})
    assert _same_template(one, replace(one, flowise_id="id-2")) is True
    assert _same_template(None, one) is False
    changes: list[dict[str, Any]] = [
        {"name": "U"},
        {"description": "other"},
        {"usecases": []},
        {"nodes": ["chatOpenAI"]},
        {"flow_data": {"nodes": [{"id": "a"}], "edges": []}},
    ]
    for change in changes:
        assert _same_template(one, replace(one, **change)) is False, change


def test_node_meta_is_what_chroma_stores_beside_a_node() -> None:
    from agentloom.packs.flowise.catalog import _node_meta

    assert _node_meta(
        {
            "label": "Buffer Memory",
            "category": "Memory",
            "version": "2",
            "badge": "DEPRECATING",
            "baseClasses": ["BufferMemory", "BaseChatMemory", "BaseMemory"],
        }
    ) == {
        "label": "Buffer Memory",
        "category": "Memory",
        "version": 2.0,
        "base_classes": "BufferMemory|BaseChatMemory|BaseMemory",
        "deprecated": True,
    }
    assert _node_meta({}) == {"label": "", "category": "", "version": 0.0, "base_classes": "", "deprecated": False}
    assert _node_meta({"badge": "NEW", "version": None, "baseClasses": None})["deprecated"] is False


def test_a_missing_or_unreadable_catalog_file_is_an_empty_catalog(
    stopped: FakeFlowise, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from agentloom.packs.flowise.catalog import CatalogState

    state = open_flowise(stopped, tmp_path)
    assert state.catalog.state() == CatalogState()
    assert state.catalog.age_seconds() is None and state.catalog.is_stale() is True
    state.catalog.path.write_text("{not json")
    with caplog.at_level("WARNING", logger="agentloom.packs.flowise.catalog"):
        assert open_flowise(stopped, tmp_path).catalog.state() == CatalogState()
    assert [r.getMessage() for r in caplog.records] == [
        f"flowise: {state.catalog.path} is not valid JSON; the next refresh rebuilds the catalog"
    ]


def test_saved_catalog_reads_back_whole(stopped: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import CatalogState, Template

    template = Template("llm-chain", "9a1b", "LLM Chain", "", [], ["llmChain"], {"nodes": [], "edges": []})
    nodes = {"llmChain": {"name": "llmChain", "category": "Chains"}}
    saved_catalog(
        stopped,
        tmp_path,
        nodes,
        {"llm-chain": template},
        refreshed_at=1_700_000_000.5,
        server_version="3.0.1",
        model="other",
        documents="1",
    )
    assert open_flowise(stopped, tmp_path).catalog.state() == CatalogState(
        1_700_000_000.5, "3.0.1", stopped.url, "other", nodes, {"llm-chain": template}, "1"
    )


def test_age_and_staleness(stopped: FakeFlowise, tmp_path: Path) -> None:
    def catalog(**fields: Any) -> Catalog:
        return saved_catalog(stopped, tmp_path, **fields).catalog

    node = {"chatOpenAI": {"name": "chatOpenAI"}}
    young = catalog(refreshed_at=time.time() - 100, nodes=node)
    age = young.age_seconds()
    assert age is not None and 100 <= age < 110 and young.is_stale() is False
    assert catalog(refreshed_at=time.time() + 500).age_seconds() == 0.0, "a clock set back: age 0, not negative"
    day = 24 * 3600
    assert catalog(refreshed_at=time.time() - day + 60, nodes=node).is_stale() is False
    assert catalog(refreshed_at=time.time() - day - 12, nodes=node).is_stale() is True
    hours = {"catalog_max_age_hours": 1.5}
    assert (
        saved_catalog(stopped, tmp_path, node, settings=hours, refreshed_at=time.time() - 5000).catalog.is_stale()
        is False
    )
    assert (
        saved_catalog(stopped, tmp_path, node, settings=hours, refreshed_at=time.time() - 5500).catalog.is_stale()
        is True
    )
    assert catalog(nodes=node, documents="1").is_stale() is True, "texts written by an older release"
    assert catalog(nodes=node, documents=None).is_stale() is True
    assert catalog(documents=None).is_stale() is False, "nothing embedded, nothing outdated"


def summary(**counts: object) -> dict:
    """A refresh's answer with nothing changed, and ``counts`` over it."""
    return {
        "new": 0,
        "updated": 0,
        "removed": 0,
        "newly_deprecated": 0,
        "templates_changed": 0,
        "nodes": 0,
        "deprecated": 0,
        "templates": 0,
        "refreshed_at": None,
        "server_version": None,
        "skipped_fresh": False,
        "stale": False,
        "message": None,
        **counts,
    }


def test_a_fresh_catalog_is_not_fetched_again(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import Template

    nodes = {
        "chatOpenAI": {"name": "chatOpenAI"},
        "old": {"name": "old", "badge": "DEPRECATING"},
        "older": {"name": "older", "badge": "DEPRECATING"},
        "new": {"name": "new", "badge": "NEW"},
    }
    template = Template("llm-chain", "9a1b", "LLM Chain", "", [], ["llmChain"], {"nodes": [], "edges": []})
    state = saved_catalog(fake_flowise, tmp_path, nodes, {"llm-chain": template})
    catalog = state.catalog
    refreshed = iso(catalog.state().refreshed_at)
    assert catalog.refresh() == summary(
        nodes=4, deprecated=2, templates=1, refreshed_at=refreshed, server_version="3.1.2", skipped_fresh=True
    )
    assert catalog.ensure() is None
    assert fake_flowise.requests == []


def test_unreachable_server_serves_the_cached_catalog_word_for_word(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    nodes = {"chatOpenAI": {"name": "chatOpenAI"}}
    state = saved_catalog(fake_flowise, tmp_path, nodes, refreshed_at=1_700_000_000.0, server_version="3.0.0")
    fake_flowise.fail_next(1, 503, path="/api/v1/nodes")
    cached = "Using the cached catalog from 2023-11-14T22:13:20.000Z."
    failed = f"Flowise at {fake_flowise.url} failed (HTTP 503: Service Unavailable). {cached}"
    assert state.catalog.refresh() == summary(
        nodes=1, refreshed_at="2023-11-14T22:13:20.000Z", server_version="3.0.0", stale=True, message=failed
    )
    assert fake_flowise.requests == [("GET", "/api/v1/nodes")]
    fake_flowise.fail_next(1, 503, path="/api/v1/version")
    assert state.catalog.ensure() == failed
    fake_flowise.stop()
    assert (
        state.catalog.ensure()
        == f"Flowise at {fake_flowise.url} unreachable; start it or set AGENTLOOM_FLOWISE__URL. {cached}"
    )
    assert state.catalog.refresh(force=True)["stale"] is True
    assert state.catalog.state().refreshed_at == 1_700_000_000.0, "the cache is kept as it was"


def test_a_server_listing_no_nodes_is_refused(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake_flowise.nodes = [{"label": "no name"}, {"name": ""}]
    state = open_flowise(fake_flowise, tmp_path)
    with pytest.raises(AgentloomError) as caught:
        state.catalog.refresh()
    assert str(caught.value) == f"Flowise at {fake_flowise.url} listed no nodes; check AGENTLOOM_FLOWISE__NODES_PATH."
    assert not state.catalog.path.exists()


def test_forget_empties_what_was_reset_and_marks_the_catalog_never_refreshed(
    stopped: FakeFlowise, tmp_path: Path
) -> None:
    from agentloom.packs.flowise.catalog import CatalogState, Template

    template = Template("llm-chain", "9a1b", "LLM Chain", "", [], ["llmChain"], {"nodes": [], "edges": []})
    nodes = {"llmChain": {"name": "llmChain"}}
    for forget_nodes, forget_templates in ((True, False), (False, True), (True, True)):
        catalog = saved_catalog(stopped, tmp_path, nodes, {"llm-chain": template}, documents="1").catalog
        catalog.forget(nodes=forget_nodes, templates=forget_templates)
        expected = CatalogState(
            None,
            "3.1.2",
            stopped.url,
            MODEL,
            {} if forget_nodes else nodes,
            {} if forget_templates else {"llm-chain": template},
            "1",
        )
        assert catalog.state() == expected
        assert open_flowise(stopped, tmp_path).catalog.state() == expected
        assert catalog.is_stale() is True
    assert [p.name for p in catalog.path.parent.iterdir() if p.name.startswith("catalog")] == ["catalog.json"]


def test_categories_and_unknown_category(stopped: FakeFlowise, tmp_path: Path) -> None:
    nodes = {
        "a": {"category": "Memory"},
        "b": {"category": "Chat Models"},
        "c": {"category": "Memory"},
        "d": {"category": "Agent Flows"},
        "e": {},
    }
    catalog = saved_catalog(stopped, tmp_path, nodes).catalog
    assert catalog.categories() == ["Agent Flows", "Chat Models", "Memory", "None"]
    with pytest.raises(AgentloomError) as caught:
        catalog.search_nodes("anything", "Robots", 3)
    assert str(caught.value) == "category 'Robots' unknown; use one of: Agent Flows, Chat Models, Memory, None."


def test_search_of_a_never_refreshed_catalog_names_the_settings(stopped: FakeFlowise, tmp_path: Path) -> None:
    catalog = saved_catalog(stopped, tmp_path, {"a": {"category": "Memory"}}, model=None).catalog
    expected = (
        f"the node catalog is empty: Flowise at {stopped.url} was never reached. Start it or set "
        "AGENTLOOM_FLOWISE__URL and AGENTLOOM_FLOWISE__API_KEY, then call flowise_refresh_catalog."
    )
    for search in (
        lambda: catalog.search_nodes("memory", None, 3),
        lambda: catalog.search_nodes("memory", "memory", 3),
        lambda: catalog.search_templates("memory", 3),
    ):
        with pytest.raises(AgentloomError) as caught:
            search()
        assert str(caught.value) == expected


# -- refresh and search on a few nodes (a few texts to embed: seconds, not tens of seconds) ---------------


def definitions(*names: str) -> list[dict]:
    from tests.packs.flowise.fake_flowise import real_catalog

    catalog = real_catalog()
    return [json.loads(json.dumps(catalog[n])) for n in names]


def template_item(name: str, description: str, *node_names: str) -> dict:
    nodes = [{"id": f"{n}_0", "data": {"name": n}} for n in node_names]
    return {
        "id": str(uuid.uuid4()),
        "templateName": name,
        "type": "Chatflow",
        "description": description,
        "usecases": ["Chatbot"],
        "flowData": json.dumps({"nodes": nodes, "edges": []}),
    }


def stored_ids(catalog, name: str) -> set[str]:
    model = catalog.state().model
    return set(catalog._collection(name, model).get()["ids"])


def test_refresh_writes_only_the_differences(
    fake_flowise: FakeFlowise, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dataclasses import replace

    from agentloom.packs.flowise.catalog import NODES, TEMPLATES, CatalogState, _node_meta, _templates
    from agentloom.packs.flowise.documents import DOCUMENTS, template_document

    fake = fake_flowise
    fake.nodes = definitions("chatOpenAI", "bufferMemory", "csvFile", "conversationalAgent", "llmChain", "pdfFile")
    fake.templates = [
        template_item("Chat", "Chat with memory", "chatOpenAI", "bufferMemory"),
        template_item("LLM Chain", "One prompt", "llmChain"),
        template_item("Old One", "Soon gone", "pdfFile"),
        {"templateName": "An Agentflow", "type": "AgentflowV2", "flowData": "{}"},
    ]
    state = open_flowise(fake, tmp_path)
    updates: list[tuple[int, int, str]] = []
    assert state.catalog.ensure(progress=lambda *update: updates.append(update)) is None
    first = state.catalog.state()
    assert first.refreshed_at is not None and time.time() - 30 < first.refreshed_at <= time.time()
    assert updates == [(6, 9, "embedded 6 of 6 nodes"), (9, 9, "embedded 3 templates")]
    assert stored_ids(state.catalog, NODES) == {n["name"] for n in fake.nodes}
    assert stored_ids(state.catalog, TEMPLATES) == {"chat", "llm-chain", "old-one"}

    fake.node("bufferMemory")["description"] = "Keeps every message"  # updated
    fake.node("llmChain")["badge"] = "DEPRECATING"  # updated, newly deprecated
    fake.node("pdfFile")["filePath"] = "/elsewhere/Pdf.js"  # not a change
    fake.node("pdfFile")["icon"] = "/elsewhere/pdf.svg"
    fake.nodes = [n for n in fake.nodes if n["name"] != "csvFile"]  # removed
    fake.nodes += definitions("calculator", "promptTemplate")  # new, the first one deprecated
    fake.node("calculator")["badge"] = "DEPRECATING"
    fake.templates[1]["description"] = "One prompt, one answer"
    fake.templates[2] = template_item("Tool Chat", "Chat with tools", "calculator", "chatOpenAI", "notANode")
    updates.clear()
    with caplog.at_level("INFO", logger="agentloom.packs.flowise.catalog"):
        changed = state.catalog.refresh(force=True, progress=lambda *update: updates.append(update))
    assert [r.getMessage() for r in caplog.records if r.name == "agentloom.packs.flowise.catalog"] == [
        f"flowise: catalog refreshed from {fake.url}: 2 new, 2 updated, 1 removed"
    ]
    now = state.catalog.state()
    assert changed == summary(
        new=2,
        updated=2,
        removed=1,
        newly_deprecated=2,
        templates_changed=3,
        nodes=7,
        deprecated=3,
        templates=3,
        refreshed_at=iso(now.refreshed_at),
        server_version="3.1.2",
    )
    assert updates == [(4, 6, "embedded 4 of 4 nodes"), (6, 6, "embedded 2 templates")]
    fetched = {n["name"]: n for n in fake.nodes}
    # Flowise gives templates new ids on every call: those of the refresh's answer are kept
    templates = {k: replace(t, flowise_id=now.templates[k].flowise_id) for k, t in _templates(fake.templates).items()}
    assert (
        open_flowise(fake, tmp_path).catalog.state()
        == now
        == CatalogState(now.refreshed_at, "3.1.2", fake.url, MODEL, fetched, templates, DOCUMENTS)
    )
    assert all(len(t.flowise_id) == 36 for t in templates.values())
    assert now.refreshed_at >= first.refreshed_at  # type: ignore[operator]  # both refreshed: set

    nodes = state.catalog._collection(NODES, MODEL).get(include=["metadatas"])
    assert set(nodes["ids"]) == set(fetched) and "csvFile" not in nodes["ids"]
    assert {i: m for i, m in zip(nodes["ids"], nodes["metadatas"], strict=True)} == {
        n: _node_meta(d) for n, d in fetched.items()
    }
    saved = state.catalog._collection(TEMPLATES, MODEL).get(include=["metadatas", "documents"])
    assert sorted(zip(saved["ids"], saved["metadatas"], saved["documents"], strict=True)) == [
        (
            "chat",
            {"name": "Chat", "nodes": "chatOpenAI,bufferMemory"},
            template_document(
                "Chat", "Chat with memory", ["Chatbot"], ["OpenAI (Chat Models)", "Buffer Memory (Memory)"]
            ),
        ),
        (
            "llm-chain",
            {"name": "LLM Chain", "nodes": "llmChain"},
            template_document("LLM Chain", "One prompt, one answer", ["Chatbot"], ["LLM Chain (Chains)"]),
        ),
        (
            "tool-chat",
            {"name": "Tool Chat", "nodes": "calculator,chatOpenAI,notANode"},
            "Tool Chat: Chat with tools Use cases: Chatbot. Nodes: Calculator (Tools), OpenAI (Chat Models), notANode.",
        ),
    ]

    unchanged = state.catalog.refresh(force=True)
    assert (
        unchanged["new"],
        unchanged["updated"],
        unchanged["removed"],
        unchanged["newly_deprecated"],
        unchanged["templates_changed"],
    ) == (0, 0, 0, 0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("field", ["url", "model", "documents"])
def test_another_server_model_or_text_version_rebuilds_the_collections(
    fake_flowise: FakeFlowise, tmp_path: Path, field: str
) -> None:
    from agentloom.packs.flowise.catalog import NODES, TEMPLATES

    fake = fake_flowise
    fake.nodes = definitions("chatOpenAI", "bufferMemory", "conversationalAgent")
    fake.templates = [
        template_item("Chat", "Chat with memory", "chatOpenAI", "bufferMemory"),
        template_item("Gone", "Not served again", "chatOpenAI"),
    ]
    state = open_flowise(fake, tmp_path)
    state.catalog.refresh()
    fake.nodes = [n for n in fake.nodes if n["name"] != "bufferMemory"]
    fake.templates = fake.templates[:1]
    saved = json.loads(state.catalog.path.read_text())
    saved[field] = {"url": "http://127.0.0.1:1", "model": "an-older-model", "documents": 1}[field]
    state.catalog.path.write_text(json.dumps(saved))
    reopened = open_flowise(fake, tmp_path)
    rebuilt = reopened.catalog.refresh(force=True)
    assert (
        rebuilt["new"],
        rebuilt["updated"],
        rebuilt["removed"],
        rebuilt["newly_deprecated"],
        rebuilt["templates_changed"],
        rebuilt["nodes"],
    ) == (2, 0, 0, 1, 1, 2), "all counted new, nothing removed"
    assert stored_ids(reopened.catalog, NODES) == {"chatOpenAI", "conversationalAgent"}, "the old collection dropped"
    assert stored_ids(reopened.catalog, TEMPLATES) == {"chat"}
    assert reopened.catalog.state().model == MODEL and reopened.catalog.state().url == fake.url


SEARCHED = (
    "chatOpenAI",
    "chatAnthropic",
    "bufferMemory",
    "bufferWindowMemory",
    "RedisBackedChatMemory",
    "conversationChain",
    "llmChain",
    "calculator",
    "promptTemplate",
    "conversationalAgent",
    "agentAgentflow",
    "startAgentflow",
)


def searchable(fake: FakeFlowise, data: Path, **settings: Any) -> Flowise:
    fake.nodes = definitions(*SEARCHED)
    fake.templates = [
        template_item(
            "Chat",
            "Chat with an OpenAI model that remembers the conversation",
            "chatOpenAI",
            "bufferMemory",
            "conversationChain",
        ),
        template_item(
            "Calculator Agent", "An agent doing arithmetic with a calculator tool", "calculator", "conversationalAgent"
        ),
    ]
    state = open_flowise(fake, data, **settings)
    state.catalog.refresh()
    return state


def own_text(state: Flowise, name: str) -> str:
    from agentloom.packs.flowise.documents import consumers, node_document

    nodes = state.catalog.state().nodes
    return node_document(nodes[name], consumers(nodes))


@pytest.mark.slow
def test_search_ranks_deprecated_nodes_lower_and_scores_by_cosine(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    state = searchable(fake_flowise, tmp_path)
    catalog = state.catalog
    window = catalog.search_nodes(own_text(state, "bufferWindowMemory"), None, 20)
    assert window[0] == {
        "name": "bufferWindowMemory",
        "label": "Buffer Window Memory",
        "category": "Memory",
        "score": 1.0,
    }
    assert [round(h["score"], 3) for h in window] == [h["score"] for h in window]
    assert all(h["score"] < 1.0 for h in window[1:]) and "deprecated" not in window[0]
    assert {h["name"] for h in window} <= set(SEARCHED) - {"agentAgentflow", "startAgentflow"}, "Agent Flows left out"
    # Its own text puts conversationalAgent first in both legs; deprecated, it moves three places down.
    agent = catalog.search_nodes(own_text(state, "conversationalAgent"), None, 20)
    assert [h["name"] for h in agent].index("conversationalAgent") == 3
    assert agent[3] == {
        "name": "conversationalAgent",
        "label": "Conversational Agent",
        "category": "Agents",
        "score": 1.0,
        "deprecated": True,
    }
    assert len(catalog.search_nodes(own_text(state, "conversationalAgent"), None, 2)) == 2
    assert "conversationalAgent" not in [
        h["name"] for h in catalog.search_nodes(own_text(state, "conversationalAgent"), None, 3)
    ]


@pytest.mark.slow
def test_search_by_category_in_any_case(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    state = searchable(fake_flowise, tmp_path)
    memory = state.catalog.search_nodes("remember the conversation", "memory", 10)
    assert {h["name"] for h in memory} == {"bufferMemory", "bufferWindowMemory", "RedisBackedChatMemory"}
    assert all(h["category"] == "Memory" for h in memory)
    flows = state.catalog.search_nodes("an agent", "AGENT FLOWS", 10)
    assert {h["name"] for h in flows} == {"agentAgentflow", "startAgentflow"}


@pytest.mark.slow
def test_search_drops_hits_catalog_json_does_not_know(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    state = searchable(fake_flowise, tmp_path)
    query = own_text(state, "bufferWindowMemory")
    saved = json.loads(state.catalog.path.read_text())
    del saved["nodes"]["bufferWindowMemory"], saved["templates"]["calculator-agent"]  # Chroma still holds them
    state.catalog.path.write_text(json.dumps(saved))
    reopened = open_flowise(fake_flowise, tmp_path)
    hits = reopened.catalog.search_nodes(query, None, 20)
    assert hits and "bufferWindowMemory" not in [h["name"] for h in hits]
    assert hits[0]["name"] in {"bufferMemory", "RedisBackedChatMemory"}
    templates = reopened.catalog.search_templates("chat with an OpenAI model that remembers the conversation", 2)
    assert [t.template_id for t, _ in templates] == ["chat"]
    assert reopened.catalog.search_templates("an agent doing arithmetic with a calculator tool", 2) == []


@pytest.mark.slow
def test_search_templates_by_cosine_above_the_threshold(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import _template_text

    state = searchable(fake_flowise, tmp_path)
    chat = state.catalog.state().templates["chat"]
    text = _template_text(chat, state.catalog.state().nodes)
    found = state.catalog.search_templates(text, 5)
    assert [t.template_id for t, _ in found][:1] == ["chat"] and found[0][0] == chat
    assert found[0][1] == pytest.approx(1.0, abs=1e-4)
    assert all(score < 0.99 for _, score in found[1:])
    assert len(state.catalog.search_templates(text, 1)) == 1
    strict = open_flowise(fake_flowise, tmp_path, min_score=0.99)
    strict_hits = strict.catalog.search_templates(text, 5)
    assert strict_hits[0][0].template_id == "chat" and strict_hits[0][1] >= 0.99
    # Under min_score only word matches (BM25) remain, after the model's hits: the order of the scores shown.
    assert all(score < 0.99 for _, score in strict_hits[1:])
    assert [t.template_id for t, _ in strict.catalog.search_templates("arithmetic", 5)] == ["calculator-agent"]
    assert strict.catalog.search_templates("zebra migration patterns", 5) == []  # no word and no meaning match


@pytest.mark.slow
def test_add_indexes_seed_entries_like_fetched_ones(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import NODES, TEMPLATES, Template
    from agentloom.packs.flowise.documents import DOCUMENTS

    fake = fake_flowise
    seed = {d["name"]: d for d in definitions("bufferMemory", "llmChain")}
    template = Template(
        "memory-chat", "", "Memory Chat", "A chat that remembers", [], ["bufferMemory"], {"nodes": [], "edges": []}
    )
    state = open_flowise(fake, tmp_path)
    updates: list[tuple[int, int, str]] = []
    before = time.time()
    state.catalog.add(seed, [template], progress=lambda *update: updates.append(update))
    added = state.catalog.state()
    assert updates == [(2, 3, "embedded 2 of 2 nodes"), (3, 3, "embedded 1 templates")]
    assert added.refreshed_at is not None and before <= added.refreshed_at <= time.time()
    assert (added.server_version, added.url, added.model, added.nodes, added.templates, added.documents) == (
        None,
        fake.url,
        MODEL,
        seed,
        {"memory-chat": template},
        DOCUMENTS,
    )
    assert state.catalog.is_stale() is False, "a never refreshed catalog counts as fresh afterwards"
    assert stored_ids(state.catalog, NODES) == set(seed) and stored_ids(state.catalog, TEMPLATES) == {"memory-chat"}
    assert fake.requests == []
    prompt = {d["name"]: d for d in definitions("promptTemplate")}
    state.catalog.add(prompt, [])
    assert stored_ids(state.catalog, NODES) == {*seed, *prompt}, "added to, not rebuilt"
    assert stored_ids(state.catalog, TEMPLATES) == {"memory-chat"}
    assert state.catalog.state().refreshed_at == added.refreshed_at

    # Onto a saved catalog: merged, its time, server, address, model and text version kept.
    old = saved_catalog(
        fake,
        tmp_path / "old",
        {"chatOpenAI": definitions("chatOpenAI")[0]},
        refreshed_at=1_700_000_000.0,
        url="http://127.0.0.1:1",
        documents="1",
        server_version="3.0.0",
    ).catalog
    old.add(seed, [])
    merged = old.state()
    assert (
        merged.refreshed_at,
        merged.server_version,
        merged.url,
        merged.model,
        sorted(merged.nodes),
        merged.templates,
        merged.documents,
    ) == (1_700_000_000.0, "3.0.0", "http://127.0.0.1:1", MODEL, ["bufferMemory", "chatOpenAI", "llmChain"], {}, "1")
    assert open_flowise(fake, tmp_path / "old").catalog.state() == merged
    # A catalog with a model but no nodes yet gets this release's text version.
    empty = saved_catalog(fake, tmp_path / "empty", model=MODEL, documents=None).catalog
    empty.add(seed, [])
    assert empty.state().documents == DOCUMENTS


@pytest.mark.slow
def test_nodes_are_embedded_in_batches_of_64(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import NODES
    from tests.packs.flowise.fake_flowise import real_catalog

    fake = fake_flowise
    fake.nodes = [json.loads(json.dumps(d)) for d in list(real_catalog().values())[:65]]
    fake.templates = []
    state = open_flowise(fake, tmp_path)
    updates: list[tuple[int, int, str]] = []
    assert state.catalog.refresh(progress=lambda *update: updates.append(update))["new"] == 65
    assert updates == [(64, 65, "embedded 64 of 65 nodes"), (65, 65, "embedded 65 of 65 nodes")]
    assert len(stored_ids(state.catalog, NODES)) == 65


@pytest.mark.slow
def test_keyword_hits_get_their_cosine_and_follow_the_catalog(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import NODES

    state = searchable(fake_flowise, tmp_path, min_score=0.99)  # the vector leg finds nothing: keyword hits only
    catalog = state.catalog
    query = "arithmetic calculator"
    assert "calculator" in [h["name"] for h in catalog.search_nodes(query, None, 5)]
    cosine = dict(catalog._query(NODES, catalog.state(), query, 20, None))
    scores = catalog._scores(NODES, catalog.state(), query, ["calculator", "llmChain"])
    assert scores == {
        "calculator": pytest.approx(cosine["calculator"], abs=1e-5),
        "llmChain": pytest.approx(cosine["llmChain"], abs=1e-5),
    }
    fake_flowise.nodes += definitions("conversationalRetrievalQAChain")
    catalog.refresh(force=True)
    hits = catalog.search_nodes("conversational retrieval QA chain", None, 5)
    assert "conversationalRetrievalQAChain" in [h["name"] for h in hits], "the keyword index follows a refresh"


def test_a_catalog_built_with_a_model_no_longer_configured_names_it(stopped: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import NODES

    catalog = saved_catalog(stopped, tmp_path, {"a": {"category": "Memory"}}, model="gone-model").catalog
    expected = (
        "the Flowise catalog was built with embedding model 'gone-model', which is not configured; its vectors "
        "can only be searched with that model"
    )
    for search in (
        lambda: catalog.search_nodes("memory", None, 3),
        lambda: catalog.search_templates("memory", 3),
        lambda: catalog._scores(NODES, catalog.state(), "memory", ["a"]),
    ):
        with pytest.raises(AgentloomError) as caught:
            search()
        assert str(caught.value).startswith(expected), str(caught.value)
        assert str(caught.value).endswith("or re-create the Flowise catalog with the current model."), str(caught.value)


def test_the_keyword_index_is_built_once_per_catalog_state(stopped: FakeFlowise, tmp_path: Path) -> None:
    catalog = saved_catalog(stopped, tmp_path, {d["name"]: d for d in definitions("calculator", "llmChain")}).catalog
    index = catalog._lexical(catalog.state())
    assert [name for name, _ in index.search("calculator", 5)] == ["calculator"]
    assert catalog._lexical(catalog.state()) is index, "not rebuilt for every search"
    catalog.forget(nodes=True, templates=False)
    emptied = catalog._lexical(catalog.state())
    assert emptied is not index and emptied.search("calculator", 5) == []
    assert catalog._lexical(catalog.state()) is emptied


E5 = "multilingual-e5-small"  # a second built-in model: its vectors are not the default model's


@pytest.mark.slow
def test_a_catalog_on_the_configured_model_scores_keyword_hits_with_it(stopped: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import NODES

    seed = {
        d["name"]: d for d in definitions("calculator", "llmChain", "chatOpenAI", "bufferMemory", "bufferWindowMemory")
    }
    state = open_flowise(stopped, tmp_path, embedding_model=E5)
    state.catalog.add(seed, [])  # never refreshed: the model configured, not the default one
    assert state.catalog.state().model == E5
    assert state.catalog._collection(NODES, E5).metadata["embedding_model"] == E5
    query = "arithmetic calculator"
    cosine = dict(state.catalog._query(NODES, state.catalog.state(), query, 5, None))
    assert 0.5 < cosine["calculator"] < 0.99 and set(cosine) == set(seed)
    assert state.catalog._scores(NODES, state.catalog.state(), query, ["calculator", "llmChain"]) == {
        "calculator": pytest.approx(cosine["calculator"], abs=1e-5),
        "llmChain": pytest.approx(cosine["llmChain"], abs=1e-5),
    }
    # min_score 1: the vector leg keeps nothing, the keyword leg finds the node, with the cosine the vector leg saw
    keyword_only = open_flowise(stopped, tmp_path, min_score=1.0).catalog
    expected = [
        {"name": "calculator", "label": "Calculator", "category": "Tools", "score": round(cosine["calculator"], 3)}
    ]
    assert keyword_only.search_nodes(query, None, 5) == expected
    assert keyword_only.search_nodes(query, "tools", 5) == expected, "the keyword leg searches the category too"
    assert keyword_only.search_nodes(query, "Memory", 5) == []


DEEP = (*SEARCHED, "chatPromptTemplate", "faiss", "openAIEmbeddings", "pdfFile", "csvFile", "serpAPI")


@pytest.mark.slow
def test_each_leg_reaches_four_places_per_result_and_eight_more(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import AGENTFLOW_CATEGORY, NODES

    fake_flowise.nodes = definitions(*DEEP)
    fake_flowise.templates = []
    state = open_flowise(fake_flowise, tmp_path, min_score=0.0)
    state.catalog.refresh()
    catalog, saved = state.catalog, state.catalog.state()
    vector = [n for n, _ in catalog._query(NODES, saved, "later", 20, {"category": {"$ne": AGENTFLOW_CATEGORY}})]
    assert vector[0] == "bufferWindowMemory" and vector.index("faiss") == 12
    assert [n for n, _ in catalog._lexical(saved).search("later", 20)] == ["faiss"]
    # limit 1: each leg 12 deep. faiss, first in the keyword leg only, ties bufferWindowMemory, first in the
    # vector leg, which comes first. limit 2: 16 deep, faiss is in both legs and wins.
    assert [h["name"] for h in catalog.search_nodes("later", None, 1)] == ["bufferWindowMemory"]
    assert [h["name"] for h in catalog.search_nodes("later", None, 2)] == ["faiss", "bufferWindowMemory"]
    # Fused with k = 10, a first place weighs: serpAPI, first by keyword, beats chatOpenAI, third by keyword
    # and sixth by meaning (k = 60 would rank chatOpenAI first).
    assert [n for n, _ in catalog._lexical(saved).search("around", 20)] == ["serpAPI", "chatAnthropic", "chatOpenAI"]
    around = [n for n, _ in catalog._query(NODES, saved, "around", 20, {"category": {"$ne": AGENTFLOW_CATEGORY}})]
    assert around.index("chatOpenAI") == 5
    assert [h["name"] for h in catalog.search_nodes("around", None, 1)] == ["serpAPI"]
    # No keyword hit among the Memory nodes: the vector leg alone finds them, within the category.
    memory = catalog.search_nodes("later", "memory", 5)
    assert [h["name"] for h in memory] == [
        n for n in vector if n in {"bufferMemory", "bufferWindowMemory", "RedisBackedChatMemory"}
    ]
    # The keyword leg alone (min_score 1): faiss, beyond the vector leg's 12, gets its cosine looked up.
    cosine = dict(catalog._query(NODES, saved, "later", 20, None))
    keyword_only = open_flowise(fake_flowise, tmp_path, min_score=1.0).catalog
    assert keyword_only.search_nodes("later", None, 1) == [
        {"name": "faiss", "label": "Faiss", "category": "Vector Stores", "score": round(cosine["faiss"], 3)}
    ]
    assert round(cosine["faiss"], 3) > 0.0, "not the 0 of a node without a cosine"


@pytest.mark.slow
def test_a_score_equal_to_min_score_is_kept(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import NODES, TEMPLATES

    state = searchable(fake_flowise, tmp_path)
    catalog, saved = state.catalog, state.catalog.state()
    query = "later"
    assert catalog._lexical(saved).search(query, 20) == [], "the vector leg alone answers"
    (node, node_score), *_ = catalog._query(NODES, saved, query, 20, {"category": "Memory"})
    (template, template_score), *_ = catalog._query(TEMPLATES, saved, query, 2, None)
    at_node = open_flowise(fake_flowise, tmp_path, min_score=node_score).catalog
    assert at_node.search_nodes(query, "Memory", 5) == [
        {"name": node, "label": saved.nodes[node]["label"], "category": "Memory", "score": round(node_score, 3)}
    ]
    at_template = open_flowise(fake_flowise, tmp_path, min_score=template_score).catalog
    assert at_template.search_templates(query, 2) == [(saved.templates[template], template_score)]


def test_search_skips_what_chroma_and_catalog_json_do_not_share(stopped: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import NODES, Template
    from agentloom.packs.flowise.documents import consumers, node_document

    seed = {d["name"]: d for d in definitions("bufferWindowMemory", "bufferMemory")}
    flow: dict[str, Any] = {"nodes": [], "edges": []}
    templates = [
        Template(
            "memory-chat", "", "Memory Chat", "A chat that remembers the conversation", [], ["bufferMemory"], flow
        ),
        Template(
            "window-chat",
            "",
            "Window Chat",
            "A chat that remembers the last messages",
            [],
            ["bufferWindowMemory"],
            flow,
        ),
        Template("calculator-agent", "", "Calculator Agent", "Arithmetic with a calculator tool", [], [], flow),
    ]
    state = open_flowise(stopped, tmp_path)
    state.catalog.add(seed, templates)
    query = node_document(seed["bufferWindowMemory"], consumers(seed))
    cosine = dict(state.catalog._query(NODES, state.catalog.state(), query, 2, None))
    # catalog.json loses bufferWindowMemory and window-chat (Chroma keeps them) and gains calculator (never embedded).
    saved = json.loads(state.catalog.path.read_text())
    del saved["nodes"]["bufferWindowMemory"], saved["templates"]["window-chat"]
    saved["nodes"]["calculator"] = definitions("calculator")[0]
    state.catalog.path.write_text(json.dumps(saved))
    strict = open_flowise(stopped, tmp_path, min_score=0.99).catalog
    # The vector leg: bufferWindowMemory alone, unknown, skipped; the keyword leg's hits come after it.
    assert [n for n, _ in strict._lexical(strict.state()).search(query, 5)] == ["bufferMemory", "calculator"]
    assert strict.search_nodes(query, None, 5) == [
        {
            "name": "bufferMemory",
            "label": "Buffer Memory",
            "category": "Memory",
            "score": round(cosine["bufferMemory"], 3),
        },
        {"name": "calculator", "label": "Calculator", "category": "Tools", "score": 0.0},
    ]
    # A keyword hit Chroma has no vector for: no cosine, 0.
    assert strict.search_nodes("arithmetic calculator", None, 5) == [
        {"name": "calculator", "label": "Calculator", "category": "Tools", "score": 0.0}
    ]
    # Templates: window-chat, the first hit, unknown, is dropped; the known one after it still fills the limit.
    lenient = open_flowise(stopped, tmp_path).catalog
    found = lenient.search_templates("a chat that remembers the last messages", 2)
    assert [t.template_id for t, _ in found] == ["memory-chat"] and found[0][1] >= 0.2
    assert lenient.search_templates("a chat that remembers the last messages", 1) == found


def test_a_catalog_json_without_nodes_or_templates_reads_as_empty_ones(stopped: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import CatalogState

    state = open_flowise(stopped, tmp_path)
    state.catalog.path.write_text(json.dumps({"refreshed_at": 1_700_000_000.0, "url": stopped.url, "model": MODEL}))
    assert state.catalog.state() == CatalogState(1_700_000_000.0, None, stopped.url, MODEL, {}, {}, None)


def test_a_catalog_exactly_as_old_as_the_limit_is_still_fresh(
    stopped: FakeFlowise, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    from agentloom.packs.flowise import catalog as module

    now = 1_800_000_000.0
    monkeypatch.setattr(module, "time", types.SimpleNamespace(time=lambda: now))
    node = {"chatOpenAI": {"name": "chatOpenAI"}}
    at_limit = saved_catalog(stopped, tmp_path, node, settings={"catalog_max_age_hours": 2.0}, refreshed_at=now - 7200)
    assert at_limit.catalog.is_stale() is False, "older than the limit, not as old as it"
    past = saved_catalog(stopped, tmp_path, node, settings={"catalog_max_age_hours": 2.0}, refreshed_at=now - 7200.5)
    assert past.catalog.is_stale() is True


@pytest.mark.slow
def test_a_refresh_embeds_nodes_and_templates_with_the_configured_model(
    fake_flowise: FakeFlowise, tmp_path: Path
) -> None:
    import numpy as np

    from agentloom.packs.flowise.catalog import NODES, _template_text
    from agentloom.packs.flowise.documents import consumers, node_document

    fake = fake_flowise
    fake.nodes = definitions("calculator", "llmChain")
    fake.templates = [
        template_item("Maths helper", "Answers arithmetic questions with a calculator", "calculator"),
        template_item("Story teller", "Writes short stories for children", "llmChain"),
        template_item("Recipe finder", "Suggests dinner recipes from what is in the fridge", "llmChain"),
    ]
    state = open_flowise(fake, tmp_path, embedding_model=E5, min_score=0.0)
    catalog = state.catalog
    catalog.refresh()
    assert catalog.state().model == E5
    nodes = catalog.state().nodes
    stored = catalog._collection(NODES, E5).get(include=["documents"])
    texts = {name: node_document(nodes[name], consumers(nodes)) for name in nodes}
    assert dict(zip(stored["ids"], stored["documents"], strict=True)) == texts, "each node's text beside its vector"
    found = catalog.search_templates("arithmetic with a calculator", 3)
    assert len(found) == 3, "more templates than nodes: every template is searched"
    template, score = found[0]
    assert template.name == "Maths helper"
    text = _template_text(template, nodes)
    assert text.endswith("Nodes: Calculator (Tools).")
    embeddings = state.catalog.embeddings
    cosine = float(
        np.dot(embeddings.embed_query("arithmetic with a calculator", E5), embeddings.embed_documents([text], E5)[0])
    )
    assert score == pytest.approx(cosine, abs=1e-4), "the template embedded with the catalog's model"


@pytest.mark.slow
def test_a_model_used_before_in_this_process_is_rebuilt_from_scratch(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    from agentloom.packs.flowise.catalog import NODES

    fake = fake_flowise
    fake.nodes, fake.templates = definitions("calculator", "llmChain", "chatOpenAI"), []
    catalog = open_flowise(fake, tmp_path).catalog
    catalog.refresh()
    catalog.settings.embedding_model = E5
    catalog.refresh(force=True)
    fake.nodes = definitions("calculator", "llmChain")
    catalog.settings.embedding_model = None  # back to the default model, whose collection this catalog opened first
    catalog.refresh(force=True)
    assert catalog.state().model == MODEL
    assert stored_ids(catalog, NODES) == {"calculator", "llmChain"}, "the default model's old collection dropped"


def _missing(message: str) -> Exception:
    from chromadb.errors import NotFoundError

    return NotFoundError(message)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(lambda: ValueError("Collection nodes does not exist."), id="chroma-0.5-valueerror"),
        pytest.param(lambda: _missing("Collection [nodes] not found"), id="notfounderror"),
    ],
)
def test_a_collection_missing_when_dropped_is_no_error(
    fake_flowise: FakeFlowise, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error
) -> None:
    from agentloom.packs.flowise.catalog import NODES

    fake = fake_flowise
    fake.nodes, fake.templates = definitions("calculator"), []
    catalog = open_flowise(fake, tmp_path).catalog

    def missing(name: str) -> None:
        raise error()

    monkeypatch.setattr(catalog.connection.client(), "delete_collection", missing)
    assert catalog.refresh()["new"] == 1
    assert stored_ids(catalog, NODES) == {"calculator"}


def test_a_failure_dropping_a_collection_fails_the_refresh_and_keeps_catalog_json(
    fake_flowise: FakeFlowise, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = fake_flowise
    fake.nodes, fake.templates = definitions("calculator"), []
    catalog = open_flowise(fake, tmp_path).catalog

    def broken(name: str) -> None:
        raise RuntimeError("disk I/O error")

    monkeypatch.setattr(catalog.connection.client(), "delete_collection", broken)
    with pytest.raises(RuntimeError, match="disk I/O error"):
        catalog.refresh()
    assert not catalog.path.exists()


@pytest.mark.slow
def test_templates_are_found_by_what_they_do(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    """Held-out needs (benchmarks/data/flowise_template_needs_heldout.json: 40, 8 in Chinese, written by someone who
    saw neither this search nor its results) over Flowise 3.1.2's 24 chatflow templates: top-3 of 90 % or more."""
    needs = json.loads((REPO / "benchmarks" / "data" / "flowise_template_needs_heldout.json").read_text())["needs"]
    state = open_flowise(fake_flowise, tmp_path)
    state.catalog.refresh()
    found = 0
    for need, acceptable in needs:
        hits = state.catalog.search_templates(need, 3)
        found += any(t.template_id in acceptable for t, _ in hits)
        scores = [score for _, score in hits]
        assert scores == sorted(scores, reverse=True), need  # replies in the order of the scores they show
    assert found / len(needs) >= 0.9, found
