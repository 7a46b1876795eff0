"""Managing what the flowise pack keeps in its ChromaDB: statistics, cleanup, samples.

Deleting what the pack has learnt is a person's decision: the tools and the learning
store only add and update; ``delete`` and ``reset`` run only when an ``agentloom flowise data``
command (``cli_data.py``) calls them after showing the selection and asking, and
``tests/packs/flowise/test_data.py`` scans the pack's code to keep it so. Selections only read:
they return what *would* be deleted, an ``Item`` (collection, id, one-line preview) each.

Size on disk (``stats``): the files of the collection's HNSW folder (named after its vector
segment under the Chroma path, found in Chroma's ``segments`` table), the vectors Chroma has not
yet moved there from its write-ahead log (``embeddings_queue``: it writes the folder every 1,000
records), and the UTF-8 bytes of its documents and of its metadata as JSON. All but the folder
live in ``chroma.sqlite3``, one file for every collection, so that file is measured by content
(opened read-only). HNSW files are allocated in blocks: an empty collection holds about 168 kB.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError
from agentloom.core.timestamps import iso
from agentloom.packs.flowise.catalog import NODES, TEMPLATES, Progress, Template, slug
from agentloom.packs.flowise.learning import ARTIFACTS, COLLECTIONS, FAILED, OUTCOMES, SESSIONS, check_design
from agentloom.packs.flowise.replies import CollectionStats

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

    from agentloom.packs.flowise.tools import Flowise

ALL, PAGE, DAY = (NODES, TEMPLATES, *COLLECTIONS), 500, 86400.0
UNITS = {"h": 3600.0, "d": DAY, "w": 7 * DAY, "m": 30 * DAY, "y": 365 * DAY}  # m: months of 30 days
AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([hdwmy])", re.IGNORECASE)


@dataclass(frozen=True)
class Item:
    """One record a command would delete, with a line a person recognises it by."""

    collection: str
    id: str
    preview: str


# -- reading -------------------------------------------------------------------------------------
def _open(state: Flowise, name: str) -> Collection | None:
    """The collection, or None when it was never created: reading never creates one."""
    from chromadb.errors import NotFoundError

    import agentloom.retrieval.embedding_function  # noqa: F401  # registers the function Chroma rebuilds

    client = state.chroma.client()
    try:
        return state.chroma.call(lambda: client.get_collection(name))
    except NotFoundError:
        return None


def _records(
    state: Flowise, collection: Any, where: dict[str, Any] | None = None
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(id, document, metadata) of every record matching ``where``, a page at a time."""
    for offset in itertools.count(0, PAGE):
        page = state.chroma.call(
            functools.partial(
                collection.get, where=where, limit=PAGE, offset=offset, include=["documents", "metadatas"]
            )
        )
        rows = zip(page["ids"], page["documents"], page["metadatas"], strict=True)
        yield from ((record_id, document or "", dict(metadata or {})) for record_id, document, metadata in rows)
        if len(page["ids"]) < PAGE:
            return


def _vector_bytes(state: Flowise) -> dict[str, int]:
    """Collection id → bytes of its HNSW folders and of its vectors still in the write-ahead log."""
    root = state.chroma.settings.path or Path("/nonexistent")
    sizes: dict[str, int] = {}
    try:
        with closing(sqlite3.connect(f"{(root / 'chroma.sqlite3').as_uri()}?mode=ro", uri=True)) as db:
            for collection_id, segment_id in db.execute("SELECT collection, id FROM segments WHERE scope = 'VECTOR'"):
                files = [f for f in (root / str(segment_id)).rglob("*") if f.is_file()]
                sizes[str(collection_id)] = sizes.get(str(collection_id), 0) + sum(f.stat().st_size for f in files)
            for topic, size in db.execute("SELECT topic, sum(length(vector)) FROM embeddings_queue GROUP BY topic"):
                collection_id = str(topic).rsplit("/", 1)[-1]  # persistent://tenant/database/<collection id>
                sizes[collection_id] = sizes.get(collection_id, 0) + int(size or 0)
    except sqlite3.Error:
        pass  # no database yet, or another Chroma layout: documents and metadata are still counted
    return sizes


def stats(state: Flowise) -> list[CollectionStats]:
    """Per collection (all five): count, bytes (see the module's docstring), oldest and newest ``created_at``."""
    opened = {name: _open(state, name) for name in ALL}
    vectors = _vector_bytes(state)
    out: list[CollectionStats] = []
    for name, collection in opened.items():
        records = [] if collection is None else list(_records(state, collection))
        times = [float(m["created_at"]) for _, _, m in records if "created_at" in m]
        size = sum(len(d.encode()) + len(json.dumps(m, ensure_ascii=False).encode()) for _, d, m in records)
        size += vectors.get(str(getattr(collection, "id", "")), 0)
        out.append(
            {
                "collection": name,
                "count": len(records),
                "bytes": size,
                "oldest": iso(min(times)) if times else None,
                "newest": iso(max(times)) if times else None,
            }
        )
    return out


# -- selecting (what would be deleted) ---------------------------------------------------
def parse_age(text: str, option: str = "--older-than") -> float:
    """``12h``, ``30d``, ``2w``, ``6m`` (months of 30 days), ``1y`` (365 days) → seconds."""
    match = AGE.fullmatch(text.strip())
    if match is None:
        raise AgentloomError(
            f"{option} {text!r} is not an age; write a number and a unit: 12h, 30d, 2w, 6m (months) or 1y."
        )
    seconds = float(match[1]) * UNITS[match[2].lower()]
    if seconds <= 0:
        raise AgentloomError(
            f"{option} {text!r} would select everything; give an age above 0 (e.g. 30d), "
            "or empty a collection with `agentloom flowise data reset`."
        )
    return seconds


def _short(text: str, width: int) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _preview(name: str, record_id: str, document: str, metadata: Mapping[str, Any]) -> str:
    when = iso(float(metadata["created_at"]))[:16].replace("T", " ") if "created_at" in metadata else "-"
    tag = {
        SESSIONS: f"{metadata.get('outcome')}, {metadata.get('tokens')} tokens",
        FAILED: f"failed: {_short(metadata.get('reason') or '', 50)}",
        ARTIFACTS: f"{metadata.get('rating')} stars" if metadata.get("rating") else "unrated",
    }.get(name, str(metadata.get("category") or metadata.get("nodes") or ""))
    return f'{name}/{record_id}  {when}  {tag}  "{_short(document, 70)}"'


def _select(
    state: Flowise, name: str, where: dict[str, Any] | None, keep: Callable[[str, dict[str, Any]], bool] | None = None
) -> list[Item]:
    collection = _open(state, name)
    if collection is None:
        return []
    return [
        Item(name, record_id, _preview(name, record_id, document, metadata))
        for record_id, document, metadata in _records(state, collection, where)
        if keep is None or keep(document, metadata)
    ]


def check_collection(name: str, allowed: tuple[str, ...] = COLLECTIONS, option: str = "--collection") -> str:
    if name not in allowed:
        hint = f" ({name} mirrors Flowise: `agentloom flowise refresh` updates it, `data reset` empties it)" * (
            name in ALL
        )
        raise AgentloomError(f"{option} {name!r} is not one of {', '.join(allowed)}{hint}.")
    return name


def older_than(
    state: Flowise, seconds: float, collections: tuple[str, ...] = COLLECTIONS, now: float | None = None
) -> list[Item]:
    """Learning records created more than ``seconds`` ago, in the given collections (default all three)."""
    collections = tuple(check_collection(name) for name in collections)
    cutoff = (time.time() if now is None else now) - seconds
    return [item for name in collections for item in _select(state, name, {"created_at": {"$lt": cutoff}})]


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """``--pattern``: a regular expression, case-insensitive, searched anywhere (a plain word matches as a
    substring)."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise AgentloomError(
            f"--pattern {pattern!r} is not a valid regular expression ({exc}); "
            "escape special characters such as ( ) [ ] . * + ? with a backslash."
        ) from None


def failed_matching(state: Flowise, pattern: str | None = None) -> list[Item]:
    """Failed designs whose reason or request matches ``pattern`` (see ``pattern_regex``); None: all of them."""
    if pattern is None:
        return _select(state, FAILED, None)
    regex = pattern_regex(pattern)
    return _select(
        state,
        FAILED,
        None,
        lambda document, metadata: bool(regex.search(document) or regex.search(str(metadata.get("reason") or ""))),
    )


def sessions_matching(
    state: Flowise, seconds: float | None = None, outcome: str | None = None, now: float | None = None
) -> list[Item]:
    """Sessions older than ``seconds``, or with this ``outcome``, or both when both are given."""
    if seconds is None and outcome is None:
        raise AgentloomError("give --older-than AGE (e.g. 30d) or --status (one of " + ", ".join(OUTCOMES) + ").")
    if outcome is not None and outcome not in OUTCOMES:
        raise AgentloomError(f"--status {outcome!r} is not a session outcome; use one of {', '.join(OUTCOMES)}.")
    cutoff = (time.time() if now is None else now) - (seconds or 0)
    clauses: list[dict[str, Any]] = [] if seconds is None else [{"created_at": {"$lt": cutoff}}]
    clauses += [] if outcome is None else [{"outcome": outcome}]
    return _select(state, SESSIONS, clauses[0] if len(clauses) == 1 else {"$and": clauses})


def everything(state: Flowise, collection: str | None = None) -> list[Item]:
    """Every record of one collection, or of all five: what ``reset`` would delete."""
    names = ALL if collection is None else (check_collection(collection, ALL),)
    return [item for name in names for item in _select(state, name, None)]


# -- deleting: only ever called by the data commands -------------------------------------
def _delete_ids(state: Flowise, collection: Any, ids: list[str]) -> None:
    for start in range(0, len(ids), PAGE):
        batch = ids[start : start + PAGE]

        def delete(batch: list[str] = batch) -> None:  # a call of .delete: the test of who deletes finds it
            collection.delete(ids=batch)

        state.chroma.call(delete)


def delete(state: Flowise, collection: str, ids: list[str]) -> int:
    """Delete these records of one learning collection; returns how many existed."""
    check_collection(collection)
    handle = _open(state, collection)
    if handle is None or not ids:
        return 0
    before = state.chroma.call(handle.count)
    _delete_ids(state, handle, list(ids))
    return before - state.chroma.call(handle.count)


def delete_items(state: Flowise, items: list[Item]) -> int:
    """Delete a selection of learning records; returns how many existed."""
    names = dict.fromkeys(item.collection for item in items)
    return sum(delete(state, name, [item.id for item in items if item.collection == name]) for name in names)


def reset(state: Flowise, collection: str | None = None, items: list[Item] | None = None) -> dict[str, int]:
    """Empty one collection or all five; returns the records deleted per collection.

    ``items`` is the selection a person was shown (``everything``); only those are deleted, so a
    record added after the prompt stays (default: whatever the collections hold now).
    The collections stay (with their embedding model), so a running server's handles stay valid.
    Emptying ``nodes`` or ``templates`` also clears that part of ``catalog.json`` (``Catalog.forget``).
    """
    names = ALL if collection is None else (check_collection(collection, ALL),)
    items = everything(state, collection) if items is None else items
    counts = dict.fromkeys(names, 0)
    for name in names:
        ids = [item.id for item in items if item.collection == name]
        handle = _open(state, name) if ids else None
        if handle is not None:
            _delete_ids(state, handle, ids)
            counts[name] = len(ids)
    if NODES in names or TEMPLATES in names:
        state.catalog.forget(nodes=NODES in names, templates=TEMPLATES in names)
    return counts


# -- samples -------------------------------------------------------------------------------------
# Real Flowise node names, for designs when the catalog has none of a category.
BUILT_IN = {
    "Chat Models": ["chatOpenAI", "chatAnthropic", "chatOllama"],
    "Memory": ["bufferMemory", "bufferWindowMemory"],
    "Document Loaders": ["pdfFile", "csvFile", "cheerioWebScraper"],
    "Embeddings": ["openAIEmbeddings"],
    "Text Splitters": ["recursiveCharacterTextSplitter"],
    "Vector Stores": ["memoryVectorStore", "faiss"],
    "Tools": ["calculator", "serpAPI"],
}
SOURCES = {
    "pdfFile": "PDF files",
    "csvFile": "a CSV export",
    "cheerioWebScraper": "our website",
    "jsonFile": "JSON exports",
}
TOPICS = [
    "our HR policies",
    "the product manual",
    "customer support tickets",
    "the API reference",
    "supplier contracts",
    "the sales playbook",
    "onboarding guides",
    "release notes",
    "the internal wiki",
    "travel expense rules",
]
ASKS = [  # per design kind: conversation, documents, tool agent
    [
        "A chatbot that answers questions about {topic} and remembers the conversation",
        "Support assistant for {topic} with chat memory",
        "Build a friendly assistant that chats about {topic}",
    ],
    ["Answer questions about {topic} from {source}", "RAG over {source} with {topic}, cite the passages"],
    [
        "An agent that can do calculations and web searches to help with {topic}",
        "Research assistant for {topic} that uses tools",
    ],
]
REASONS = [
    "Flowise rejected the flow: credential missing for {model}",
    "timeout while upserting the vector store",
    "the user said the answers ignored the documents",
    "node {model} is deprecated on this server",
]
# The runners sample designs end in, then kinds crossed with the providers that offer them: name, label,
# category, base classes, description, class-typed inputs ("Label:Type", "?" when optional).
RUNNERS = [
    (
        "conversationChain",
        "Conversation Chain",
        "Chains",
        ["ConversationChain"],
        "Chat models specific conversational chain with memory",
        "Chat Model:BaseChatModel, Memory:BaseMemory",
    ),
    (
        "conversationalRetrievalQAChain",
        "Conversational Retrieval QA Chain",
        "Chains",
        ["ConversationalRetrievalQAChain"],
        "Document QA with a chat history",
        "Chat Model:BaseChatModel, Vector Store Retriever:BaseRetriever, Memory:BaseMemory?",
    ),
    (
        "toolAgent",
        "Tool Agent",
        "Agents",
        ["AgentExecutor"],
        "Agent that uses Function Calling to pick the tools to call",
        "Tools:Tool, Memory:BaseChatMemory, Tool Calling Chat Model:BaseChatModel",
    ),
]
KINDS = [
    (
        "chat{P}",
        "Chat{P}",
        "Chat Models",
        ["BaseChatModel"],
        "Wrapper around {P} chat models",
        "Cache:BaseCache?",
        ["OpenAI", "Anthropic", "Mistral", "Groq", "Cohere", "Ollama", "Bedrock", "VertexAI", "DeepSeek", "Perplexity"],
    ),
    (
        "{p}Embeddings",
        "{P} Embeddings",
        "Embeddings",
        ["Embeddings"],
        "{P} API to generate embeddings for a given text",
        "",
        ["OpenAI", "Cohere", "Mistral", "Ollama", "VoyageAI", "Jina", "Bedrock", "VertexAI"],
    ),
    (
        "{p}",
        "{P}",
        "Vector Stores",
        ["VectorStoreRetriever", "BaseRetriever"],
        "Upsert embedded data and search it with {P}",
        "Document:Document?, Embeddings:Embeddings",
        [
            "Pinecone",
            "Qdrant",
            "Weaviate",
            "Chroma",
            "Milvus",
            "Redis",
            "Postgres",
            "MongoDBAtlas",
            "Elasticsearch",
            "OpenSearch",
        ],
    ),
    (
        "{p}Loader",
        "{P} Loader",
        "Document Loaders",
        ["Document"],
        "Load documents from {P}",
        "Text Splitter:TextSplitter?",
        ["Notion", "Confluence", "Slack", "GitHub", "Jira", "GoogleDrive", "SharePoint", "S3", "Airtable", "Figma"],
    ),
    (
        "{p}ChatMemory",
        "{P} Chat Memory",
        "Memory",
        ["BaseChatMemory"],
        "Stores the conversation in {P}",
        "",
        ["Redis", "Postgres", "MongoDB", "DynamoDB", "Upstash", "Zep"],
    ),
    (
        "{p}Tool",
        "{P} Tool",
        "Tools",
        ["Tool"],
        "Lets an agent search and act in {P}",
        "",
        ["Slack", "GitHub", "Jira", "Gmail", "Wikipedia", "WolframAlpha", "Tavily", "BraveSearch"],
    ),
]


def _candidates() -> Iterator[tuple[str, str, str, list[str], str, str]]:
    yield from RUNNERS
    for i in itertools.count():
        name, label, category, bases, description, anchors, providers = KINDS[i % len(KINDS)]
        provider, lap = providers[(i // len(KINDS)) % len(providers)], (i // len(KINDS)) // len(providers)
        fill, suffix = {"P": provider, "p": provider[0].lower() + provider[1:]}, str(lap + 1) if lap else ""
        yield (
            name.format(**fill) + suffix,
            f"{label.format(**fill)} {suffix}".strip(),
            category,
            bases,
            description.format(**fill),
            anchors,
        )


def _sample_nodes(existing: Mapping[str, Any], count: int) -> dict[str, dict[str, Any]]:
    """Node definitions shaped like Flowise's; names the catalog already has are skipped."""
    out: dict[str, dict[str, Any]] = {}
    for name, label, category, bases, description, anchors in _candidates():
        if len(out) >= count:
            break
        if name in existing or name in out:
            continue
        inputs = [
            {
                "label": a,
                "name": a[0].lower() + a[1:].replace(" ", ""),
                "type": t.rstrip("?"),
                "optional": t.endswith("?"),
            }
            for a, t in (anchor.split(":") for anchor in anchors.split(", ") if anchor)
        ]
        out[name] = {
            "name": name,
            "label": label,
            "version": 1.0,
            "type": bases[0],
            "category": category,
            "description": description,
            "baseClasses": bases,
            "inputs": inputs,
        }
    return out


def _design(rng: random.Random, nodes: Mapping[str, Mapping[str, Any]]) -> tuple[int, str, dict[str, Any]]:
    """(kind, request, compact design) of a plausible chatflow, from the catalog's nodes when it has the category."""

    def pick(category: str) -> str:
        names = [n for n, d in nodes.items() if d.get("category") == category and d.get("badge") != "DEPRECATING"]
        return rng.choice(names or BUILT_IN[category])

    kind, model, memory = rng.randrange(len(ASKS)), pick("Chat Models"), pick("Memory")
    loader, splitter, embeddings, store = (
        pick(c) for c in ("Document Loaders", "Text Splitters", "Embeddings", "Vector Stores")
    )
    chain, parts = [
        ("conversationChain", [model, memory]),
        ("conversationalRetrievalQAChain", [model, memory, store]),
        ("toolAgent", [model, memory, *dict.fromkeys([pick("Tools"), pick("Tools")])]),
    ][kind]
    connections = [[p, chain] for p in parts]
    if kind == 1:
        connections += [[splitter, loader], [loader, store], [embeddings, store]]
        parts = [loader, splitter, embeddings, *parts]
    request = rng.choice(ASKS[kind]).format(
        topic=rng.choice(TOPICS),
        source=SOURCES.get(parts[0])
        or str(nodes.get(parts[0], {}).get("label", "uploaded documents")).removesuffix(" Loader"),
    )
    design = check_design(
        {
            "nodes": [*parts, chain],
            "connections": connections,
            "config": {model: {"temperature": round(rng.uniform(0, 1), 1)}},
        }
    )
    return kind, request, design


def _sample_template(rng: random.Random, nodes: Mapping[str, Mapping[str, Any]], taken: set[str]) -> Template:
    kind, request, design = _design(rng, nodes)
    model = next(iter(design["config"]))
    label = str(nodes.get(model, {}).get("label") or model)
    base = ["Conversation", "Document QnA", "Tool Agent"][kind] + f" with {label}"
    name = next(n for n in itertools.chain([base], (f"{base} {i}" for i in itertools.count(2))) if slug(n) not in taken)
    ids = {node: f"{node}_{i}" for i, node in enumerate(design["nodes"])}
    flow = {
        "nodes": [
            {"id": ids[node], "data": {"id": ids[node], "name": node, "label": nodes.get(node, {}).get("label", node)}}
            for node in design["nodes"]
        ],
        "edges": [{"source": ids[a], "target": ids[b], "id": f"{ids[a]}-{ids[b]}"} for a, b in design["connections"]],
    }
    return Template(slug(name), "", name, request + ".", ["Sample"], design["nodes"], flow)


def seed(
    state: Flowise,
    nodes: int = 0,
    templates: int = 0,
    artifacts: int = 0,
    progress: Progress | None = None,
    rng_seed: int | None = None,
) -> dict[str, int]:
    """Add sample nodes and templates to the catalog and sample designs (with their sessions) to the learning store.

    Samples go through the pack's own writers (the catalog's, ``LearningStore.save``): found like real
    entries. A never refreshed catalog counts as fresh, so searches use samples without a Flowise
    server; a refresh drops sample nodes the server lacks. Designs use the catalog's node names (else
    ``BUILT_IN``), dated over the last year, one in five failed, each with sessions.
    """
    for value, option in ((nodes, "--nodes"), (templates, "--templates"), (artifacts, "--artifacts")):
        if value < 0:
            raise AgentloomError(f"{option} {value} is negative; give a count of 0 or more.")
    rng, total, now = random.Random(rng_seed), nodes + templates + artifacts, time.time()

    def report(done: int, message: str) -> None:
        (progress or (lambda *_: None))(done, total, message)

    catalog = state.catalog
    if nodes or templates:
        old = catalog.state()
        fresh = _sample_nodes(old.nodes, nodes)
        merged = {**old.nodes, **fresh}
        taken, made = set(old.templates), []
        for _ in range(templates):
            made.append(_sample_template(rng, merged, taken))
            taken.add(made[-1].template_id)
        catalog.add(fresh, made, lambda done, _, msg: report(done, msg))
    learning, known = state.learning, catalog.state().nodes
    for i in range(artifacts):
        kind, request, design = _design(rng, known)
        success = i % 5 != 4
        reason = None if success else rng.choice(REASONS).format(model=next(iter(design["config"])))
        chatflow = str(uuid.uuid4()) if success else None
        bundle = {
            "spec": f"Spec: {request}.",
            "plan": f"Plan: {', '.join(design['nodes'])}.",
            "tasks": ["create", "test"],
        }
        created = now - rng.uniform(0, 365 * DAY)  # samples' ages vary, so pruning by age has something to select
        artifact_id = learning.save(request, bundle, design, chatflow, success, reason, known, created_at=created)
        if success and rng.random() < 0.6:
            learning.rate(artifact_id, rng.choice([1, 2, 3, 4, 5, 5, 4]))
        extra = [o for o, every in (("reused", 3), ("rejected", 7)) if success and i % every == 0]
        for outcome in ["created" if success else "failed", *extra]:
            tokens = rng.randint(300, 600) if outcome in ("reused", "rejected") else rng.randint(4000, 40000)
            seconds = rng.uniform(5, 600)
            learning.record_session(
                request,
                outcome,
                tokens,
                seconds,
                chatflow,
                artifact_id,
                created_at=min(now, created + rng.uniform(0, 30 * DAY)),
            )
        report(nodes + templates + i + 1, f"saved {i + 1} of {artifacts} sample designs")
    return {"nodes": nodes, "templates": templates, "artifacts": artifacts}
