"""The node and template catalog: Flowise's definitions on disk, their texts in ChromaDB.

Two stores, one commit point. ``catalog.json`` in the pack's folder holds every node
definition and chatflow template as the server last gave them, with the refresh time,
the server's version and the embedding model; the Chroma collections ``nodes`` and
``templates`` hold one embedded text per entry for search. A refresh diffs the
server's answer against ``catalog.json`` (by name, version and definition), writes the
changes to Chroma, and only then replaces ``catalog.json``; a refresh that fails halfway
leaves the old file, so the next one finds the same differences and writes them again
(upserts and deletes by id are idempotent). Search hits that ``catalog.json`` does not
know are dropped, so a half-written refresh is never visible.

Deprecated nodes (``badge == "DEPRECATING"``) stay searchable but rank lower
(``DEPRECATED_RANKS`` places down) and say so. Flowise serves one
version per node name; were there several, the newest wins.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError, DependencyUnavailable
from agentloom.core.timestamps import iso
from agentloom.embeddings.glossary import glossary
from agentloom.packs.flowise.chroma import open_collection
from agentloom.packs.flowise.client import FlowiseClient
from agentloom.packs.flowise.documents import DOCUMENTS, consumers, node_document, template_document
from agentloom.packs.flowise.replies import Refreshed
from agentloom.packs.flowise.settings import FlowiseSettings
from agentloom.retrieval.lexical import reciprocal_rank_fusion

if TYPE_CHECKING:
    from agentloom.embeddings import EmbeddingService
    from agentloom.retrieval.connection import ChromaConnection
    from agentloom.retrieval.lexical import LexicalIndex

log = logging.getLogger(__name__)

NODES, TEMPLATES = "nodes", "templates"
# Deprecated nodes move this many places down the fused ranking.
DEPRECATED_RANKS = 3
# Reciprocal rank fusion of the vector and keyword legs; a small k lets first places weigh.
RRF_K = 10
# Agentflow V2 nodes cannot be used in a chatflow: searched only when asked for by category.
AGENTFLOW_CATEGORY = "Agent Flows"
Progress = Callable[[int, int, str], None]


@dataclass
class Template:
    template_id: str  # a slug of the name: a few tokens for an agent to pass back
    flowise_id: str
    name: str
    description: str
    usecases: list[str]
    nodes: list[str]  # node names in the flow, sticky notes left out
    flow_data: dict[str, Any]


@dataclass
class CatalogState:
    refreshed_at: float | None = None
    server_version: str | None = None
    url: str | None = None
    model: str | None = None
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    templates: dict[str, Template] = field(default_factory=dict)
    documents: str | None = None  # the version of the node texts embedded (documents.DOCUMENTS)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _fingerprint(definition: Mapping[str, Any]) -> str:
    """What decides "updated": the definition without the server's file paths."""
    kept = {k: v for k, v in definition.items() if k not in ("filePath", "icon")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def _newest(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for node in nodes:
        name = node.get("name")
        if not isinstance(name, str) or not name:
            continue
        old = out.get(name)
        if old is None or float(node.get("version") or 0) >= float(old.get("version") or 0):
            out[name] = node
    return out


def _templates(answer: list[dict[str, Any]]) -> dict[str, Template]:
    out: dict[str, Template] = {}
    for item in answer:
        if item.get("type") not in ("Chatflow", "CHATFLOW"):
            continue  # Agentflow and Tool templates are not chatflows
        try:
            flow = item["flowData"] if isinstance(item["flowData"], dict) else json.loads(item["flowData"])
        except (KeyError, TypeError, ValueError):
            log.warning("flowise: template %r has no readable flowData; skipped", item.get("templateName"))
            continue
        name = str(item.get("templateName") or item.get("name") or item.get("id"))
        nodes = [
            n["data"]["name"]
            for n in flow.get("nodes", [])
            if n.get("data", {}).get("name") not in (None, "stickyNote")
        ]
        template = Template(
            template_id=slug(name),
            flowise_id=str(item.get("id", "")),
            name=name,
            description=str(item.get("description") or flow.get("description") or ""),
            usecases=list(item.get("usecases") or []),
            nodes=nodes,
            flow_data={"nodes": flow.get("nodes", []), "edges": flow.get("edges", [])},
        )
        out[template.template_id] = template
    return out


class Catalog:
    def __init__(
        self,
        folder: Path,
        settings: FlowiseSettings,
        client: FlowiseClient,
        connection: ChromaConnection,
        embeddings: EmbeddingService,
    ) -> None:
        self.path = folder / "catalog.json"
        self.settings = settings
        self.client = client
        self.connection = connection
        self.embeddings = embeddings
        self._state: CatalogState | None = None
        self._collections: dict[tuple[str, str], Any] = {}
        self._keyword: dict[str, tuple[CatalogState, LexicalIndex]] = {}  # NODES / TEMPLATES -> BM25 of that state
        self._lock = threading.RLock()

    # -- state ------------------------------------------------------------------------------------
    def state(self) -> CatalogState:
        with self._lock:
            if self._state is None:
                self._state = self._read()
            return self._state

    def _read(self) -> CatalogState:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return CatalogState()
        except ValueError:
            log.warning("flowise: %s is not valid JSON; the next refresh rebuilds the catalog", self.path)
            return CatalogState()
        templates = {k: Template(**v) for k, v in raw.get("templates", {}).items()}
        return CatalogState(
            raw.get("refreshed_at"),
            raw.get("server_version"),
            raw.get("url"),
            raw.get("model"),
            raw.get("nodes", {}),
            templates,
            raw.get("documents"),
        )

    def _write(self, state: CatalogState) -> None:
        data = asdict(state)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path)
        self._state = state

    def age_seconds(self) -> float | None:
        refreshed = self.state().refreshed_at
        return None if refreshed is None else max(0.0, time.time() - refreshed)

    def is_stale(self) -> bool:
        age, state = self.age_seconds(), self.state()
        outdated = bool(state.nodes) and state.documents != DOCUMENTS  # written by an older release
        return age is None or outdated or age > self.settings.catalog_max_age_hours * 3600

    # -- refresh ----------------------------------------------------------------------------------
    def refresh(self, force: bool = False, progress: Progress | None = None) -> Refreshed:
        with self._lock:
            old = self.state()
            if not force and not self.is_stale():
                return self._summary(old, fresh=True)
            try:
                fetched = _newest(self.client.nodes())
                templates = _templates(self.client.templates())
                version = self.client.version()
            except DependencyUnavailable as exc:
                if old.refreshed_at is None:
                    raise
                summary = self._summary(old, fresh=False)
                summary["stale"] = True
                summary["message"] = f"{exc} Using the cached catalog from {iso(old.refreshed_at)}."
                return summary
            if not fetched:
                raise AgentloomError(
                    f"Flowise at {self.client.url} listed no nodes; check AGENTLOOM_FLOWISE__NODES_PATH."
                )
            model = self.embeddings.model(self.settings.embedding_model).key
            rebuild = model != old.model or old.url != self.client.url or old.documents != DOCUMENTS
            before = {} if rebuild else old.nodes
            new = [n for n in fetched if n not in before]
            updated = [n for n in fetched if n in before and _fingerprint(fetched[n]) != _fingerprint(before[n])]
            removed = [n for n in before if n not in fetched]
            was_deprecated = {n for n, d in before.items() if d.get("badge") == "DEPRECATING"}
            newly_deprecated = [
                n for n in fetched if fetched[n].get("badge") == "DEPRECATING" and n not in was_deprecated
            ]
            old_templates = {} if rebuild else old.templates
            changed_templates = [
                t for t in templates.values() if not _same_template(old_templates.get(t.template_id), t)
            ]
            gone_templates = [k for k in old_templates if k not in templates]
            self._write_chroma(
                model, rebuild, fetched, new + updated, removed, changed_templates, gone_templates, progress
            )
            state = CatalogState(time.time(), version, self.client.url, model, fetched, templates, DOCUMENTS)
            self._write(state)
            summary = self._summary(state, fresh=False)
            summary.update(
                {
                    "new": len(new),
                    "updated": len(updated),
                    "removed": len(removed),
                    "newly_deprecated": len(newly_deprecated),
                    "templates_changed": len(changed_templates) + len(gone_templates),
                }
            )
            log.info(
                "flowise: catalog refreshed from %s: %d new, %d updated, %d removed",
                self.client.url,
                len(new),
                len(updated),
                len(removed),
            )
            return summary

    def add(
        self, nodes: dict[str, dict[str, Any]], templates: list[Template], progress: Progress | None = None
    ) -> None:
        """Index entries that did not come from the server (``data seed``'s samples) like fetched ones.
        A never refreshed catalog counts as fresh afterwards; a refresh drops nodes the server lacks."""
        with self._lock:
            old = self.state()
            model = old.model or self.embeddings.model(self.settings.embedding_model).key
            merged = {**old.nodes, **nodes}
            self._write_chroma(model, False, merged, list(nodes), [], templates, [], progress)
            self._write(
                CatalogState(
                    old.refreshed_at or time.time(),
                    old.server_version,
                    old.url or self.client.url,
                    model,
                    merged,
                    {**old.templates, **{t.template_id: t for t in templates}},
                    old.documents if old.nodes else DOCUMENTS,
                )
            )

    def forget(self, *, nodes: bool, templates: bool) -> None:
        """After ``data reset`` emptied ``nodes`` or ``templates``: drop them from ``catalog.json`` and mark
        the catalog never refreshed, so the next search fetches it again rather than trust a stale file."""
        with self._lock:
            old = self.state()
            self._write(
                CatalogState(
                    None,
                    old.server_version,
                    old.url,
                    old.model,
                    {} if nodes else old.nodes,
                    {} if templates else old.templates,
                    old.documents,
                )
            )

    def ensure(self, progress: Progress | None = None) -> str | None:
        """A catalog to work with: refreshed when stale; a warning when only a stale one is at hand."""
        summary = self.refresh(progress=progress) if self.is_stale() else None
        return summary.get("message") if summary else None

    def _summary(self, state: CatalogState, *, fresh: bool) -> Refreshed:
        deprecated = sum(1 for d in state.nodes.values() if d.get("badge") == "DEPRECATING")
        return {
            "new": 0,
            "updated": 0,
            "removed": 0,
            "newly_deprecated": 0,
            "templates_changed": 0,
            "nodes": len(state.nodes),
            "deprecated": deprecated,
            "templates": len(state.templates),
            "refreshed_at": iso(state.refreshed_at) if state.refreshed_at else None,
            "server_version": state.server_version,
            "skipped_fresh": fresh,
            "stale": False,
            "message": None,
        }

    def _collection(self, name: str, model: str, *, recreate: bool = False) -> Any:
        """One of the catalog's collections; ``recreate`` drops it first (a new model or server)."""
        cached = self._collections.get((name, model))
        if cached is not None and not recreate:
            return cached
        if recreate:
            client = self.connection.client()

            def drop() -> None:
                try:
                    client.delete_collection(name)
                except Exception as exc:
                    if "does not exist" not in str(exc) and type(exc).__name__ != "NotFoundError":
                        raise

            self.connection.call(drop)
        self._collections[(name, model)] = open_collection(self.connection, self.embeddings, name, model)
        return self._collections[(name, model)]

    def _write_chroma(
        self,
        model: str,
        rebuild: bool,
        nodes: dict[str, dict[str, Any]],
        changed: list[str],
        removed: list[str],
        templates: list[Template],
        gone_templates: list[str],
        progress: Progress | None,
    ) -> None:
        takers = consumers(nodes)
        # Texts of changed nodes only: an unchanged node whose example could now name a new consumer keeps its text.
        node_texts = {name: node_document(nodes[name], takers) for name in changed}
        total = len(node_texts) + len(templates)
        done = 0

        def step(n: int, message: str) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total, message)

        node_col = self._collection(NODES, model, recreate=rebuild)
        names = list(node_texts)
        for start in range(0, len(names), 64):
            batch = names[start : start + 64]
            texts = [node_texts[n] for n in batch]
            vectors = self.embeddings.embed_documents(texts, model)
            metas = [_node_meta(nodes[n]) for n in batch]
            self.connection.call(
                functools.partial(node_col.upsert, ids=batch, documents=texts, embeddings=vectors, metadatas=metas)
            )
            step(len(batch), f"embedded {start + len(batch)} of {len(names)} nodes")
        if removed:
            self.connection.call(lambda: node_col.delete(ids=removed))
        template_col = self._collection(TEMPLATES, model, recreate=rebuild)
        if templates:
            texts = [_template_text(t, nodes) for t in templates]
            vectors = self.embeddings.embed_documents(texts, model)
            ids = [t.template_id for t in templates]
            metas = [{"name": t.name, "nodes": ",".join(t.nodes)} for t in templates]
            self.connection.call(
                lambda: template_col.upsert(ids=ids, documents=texts, embeddings=vectors, metadatas=metas)
            )
            step(len(templates), f"embedded {len(templates)} templates")
        if gone_templates:
            self.connection.call(lambda: template_col.delete(ids=gone_templates))

    # -- search -----------------------------------------------------------------------------------
    def categories(self) -> list[str]:
        return sorted({str(d.get("category")) for d in self.state().nodes.values()})

    def search_nodes(self, query: str, category: str | None, limit: int) -> list[dict[str, Any]]:
        state = self.state()
        if category is not None:
            known = {c.lower(): c for c in self.categories()}
            if category.lower() not in known:
                raise AgentloomError(f"category {category!r} unknown; use one of: {', '.join(sorted(known.values()))}.")
            category = known[category.lower()]
        where: dict[str, Any] = {"category": category} if category else {"category": {"$ne": AGENTFLOW_CATEGORY}}
        depth = _depth(limit)
        cosine = dict(self._query(NODES, state, query, depth, where))
        allowed = [
            n
            for n, d in state.nodes.items()
            if (d.get("category") == category if category else d.get("category") != AGENTFLOW_CATEGORY)
        ]
        keyword = [n for n, _ in self._lexical(state).search(query, depth, allowed)]
        vector = [n for n, s in sorted(cosine.items(), key=lambda kv: -kv[1]) if s >= self.settings.min_score]
        fused = reciprocal_rank_fusion([vector, keyword], k=RRF_K)
        self._add_cosines(NODES, state, query, [n for n, _ in fused], cosine)
        results = []
        for position, (name, _) in enumerate(fused):
            definition = state.nodes.get(name)
            if definition is None:
                continue
            score = cosine.get(name, 0.0)
            deprecated = definition.get("badge") == "DEPRECATING"
            # Half a place more: a deprecated node lands after the node it ties with, DEPRECATED_RANKS places down.
            rank = -position - (DEPRECATED_RANKS + 0.5 if deprecated else 0)
            item: dict[str, Any] = {
                "name": name,
                "label": definition.get("label"),
                "category": definition.get("category"),
                "score": round(score, 3),
            }
            if deprecated:
                item["deprecated"] = True
            results.append((rank, item))
        results.sort(key=lambda r: -r[0])
        return [item for _, item in results[:limit]]

    def search_templates(self, query: str, limit: int) -> list[tuple[Template, float]]:
        """Templates for a need, by what they do: their text (name, description, use cases, nodes and the nodes'
        categories) through the catalog's model, then BM25's hits the model missed. A Chinese request is searched
        through its glossary translation (the catalog's model reads English)."""
        state = self.state()
        text = glossary().translate(query) or query
        depth = _depth(limit)
        cosine = dict(self._query(TEMPLATES, state, text, depth, None))
        keyword = [t for t, _ in self._lexical(state, TEMPLATES).search(text, depth)]
        vector = [t for t, s in sorted(cosine.items(), key=lambda kv: -kv[1]) if s >= self.settings.min_score]
        # The model orders; BM25 adds what the model scored under min_score or past its depth (a need named by a
        # word, "10-K", "SQL"): BM25 picks which fill the places left, their cosines order them after the model's
        # hits, so a reply is always in the order of the scores it shows.
        hits = [t for t in vector if t in state.templates][:limit]
        extra = [t for t in keyword if t not in hits and t in state.templates][: limit - len(hits)]
        self._add_cosines(TEMPLATES, state, text, extra, cosine)
        fused = hits + sorted(extra, key=lambda t: -cosine.get(t, 0.0))
        return [(state.templates[t], cosine.get(t, 0.0)) for t in fused]

    def _lexical(self, state: CatalogState, name: str = NODES) -> LexicalIndex:
        """BM25 over the node or template texts (``name``: NODES or TEMPLATES), rebuilt when the catalog changes
        (a few ms for 300 nodes)."""
        from agentloom.retrieval.lexical import LexicalIndex

        with self._lock:
            built = self._keyword.get(name)
            if built is None or built[0] is not state:
                if name == NODES:
                    takers = consumers(state.nodes)
                    ids = list(state.nodes)
                    texts = [node_document(state.nodes[n], takers) for n in ids]
                else:
                    ids = list(state.templates)
                    texts = [_template_text(state.templates[t], state.nodes) for t in ids]
                built = self._keyword[name] = (state, LexicalIndex.build(ids, texts))
            return built[1]

    def _add_cosines(
        self, name: str, state: CatalogState, query: str, ids: list[str], cosine: dict[str, float]
    ) -> None:
        """The cosines of keyword hits beyond the vector leg's depth, added to ``cosine`` for the reply."""
        missing = [i for i in ids if i not in cosine]
        if missing:
            cosine.update(self._scores(name, state, query, missing))

    def _scores(self, name: str, state: CatalogState, query: str, ids: list[str]) -> dict[str, float]:
        import numpy as np

        model = self.embeddings.require(state.model or "", "the Flowise catalog").key
        vector = self.embeddings.embed_query(query, model)
        collection = self._collection(name, model)
        got = self.connection.call(lambda: collection.get(ids=ids, include=["embeddings"]))
        return {i: float(np.dot(vector, e)) for i, e in zip(got["ids"], got["embeddings"], strict=True)}

    def _query(
        self, name: str, state: CatalogState, query: str, n: int, where: dict[str, Any] | None
    ) -> list[tuple[str, float]]:
        if state.model is None:
            raise AgentloomError(
                f"the node catalog is empty: Flowise at {self.client.url} was never reached. Start it or set "
                "AGENTLOOM_FLOWISE__URL and AGENTLOOM_FLOWISE__API_KEY, then call flowise_refresh_catalog."
            )
        model = self.embeddings.require(state.model, "the Flowise catalog").key
        vector = self.embeddings.embed_query(query, model)
        collection = self._collection(name, model)
        count = len(state.nodes) if name == NODES else len(state.templates)
        answer = self.connection.call(
            lambda: collection.query(
                query_embeddings=[vector], n_results=max(1, min(n, count)), where=where, include=["distances"]
            )
        )
        return [(i, 1.0 - float(d)) for i, d in zip(answer["ids"][0], answer["distances"][0], strict=True)]


def _template_text(template: Template, nodes: Mapping[str, Mapping[str, Any]]) -> str:
    """What a template is found by: its name, description and use cases, and each node's label and category."""
    labels = []
    for name in dict.fromkeys(template.nodes):
        node = nodes.get(name, {})
        category = node.get("category")
        labels.append(f"{node.get('label', name)} ({category})" if category else str(node.get("label", name)))
    return template_document(template.name, template.description, template.usecases, labels)


def _depth(limit: int) -> int:
    """Hits asked of Chroma (and of the keyword leg) for ``limit`` results: room for the fusion of two legs and for
    hits dropped afterwards (below ``min_score``, or unknown to catalog.json when Chroma got ahead of it)."""
    return limit * 4 + 8


def _same_template(old: Template | None, new: Template) -> bool:
    """Equal but for Flowise's id, which the server makes anew on every call."""
    return old is not None and (old.name, old.description, old.usecases, old.nodes, old.flow_data) == (
        new.name,
        new.description,
        new.usecases,
        new.nodes,
        new.flow_data,
    )


def _node_meta(definition: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "label": str(definition.get("label", "")),
        "category": str(definition.get("category", "")),
        "version": float(definition.get("version") or 0),
        "base_classes": "|".join(definition.get("baseClasses") or []),
        "deprecated": definition.get("badge") == "DEPRECATING",
    }
