"""Earlier designs, kept so an agent never designs the same chatflow twice.

Three collections in the pack's ChromaDB, beside the catalog's:

- ``sdd_artifacts``: one finished design bundle per success, the request text embedded;
- ``failed_artifacts``: the same for failures, with the reason (never offered for reuse);
- ``sessions``: one record per build attempt (request, outcome, tokens, seconds, chatflow id).

Record layout (metadata; the document is the request text), shared with ``data.py``:
``created_at`` (epoch seconds, for range deletes), ``success``, ``rating`` (0 = unrated, else
1-5), ``chatflow_id``, ``nodes`` (comma-joined names), ``node_versions`` (JSON ``{name:
version}``), ``bundle`` (JSON ``{spec, plan, tasks, design}``), ``reason`` (failures),
``rejections`` and ``last_rejection``. Sessions: ``created_at``, ``outcome``, ``tokens``,
``seconds``, ``chatflow_id``, ``artifact_id``.

Ranking: a design is offered when its request's cosine similarity to the new one is
above ``MATCH`` (0.70). Among those, the order uses the similarity plus ``RATING_STEP`` (0.02)
per star above or below 3 (a 5-star design gains 0.04, a 1-star one loses 0.04, unrated
counts as 3), so a rating decides between close matches without lifting a poor match over a
good one; the threshold itself is always applied to the plain similarity. When the next
designs rank within ``TIE`` (5 %) of the best, up to 3 are offered.
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError, NotFoundError
from agentloom.core.timestamps import iso
from agentloom.packs.flowise.chroma import open_collection
from agentloom.packs.flowise.replies import Rated
from agentloom.retrieval.columns import column

if TYPE_CHECKING:
    from agentloom.embeddings import EmbeddingService
    from agentloom.retrieval.connection import ChromaConnection

ARTIFACTS, FAILED, SESSIONS = "sdd_artifacts", "failed_artifacts", "sessions"
COLLECTIONS = (ARTIFACTS, FAILED, SESSIONS)
MATCH = 0.70
TIE = 0.05
RATING_STEP = 0.02
MAX_OFFERED = 3
OUTCOMES = ("created", "reused", "rejected", "failed")


def check_design(design: Any) -> dict[str, Any]:
    """The compact design form: ``{nodes: [names], connections: [[from, to], ...], config: {...}}``."""
    if not isinstance(design, Mapping):
        raise AgentloomError("design must be an object {nodes, connections, config}.")
    unknown = sorted(set(design) - {"nodes", "connections", "config"})
    if unknown:
        raise AgentloomError(f"design has unknown keys {unknown}; use nodes, connections and config.")
    nodes = design.get("nodes")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) and n for n in nodes):
        raise AgentloomError("design.nodes must be a non-empty list of node names.")
    connections = design.get("connections", [])
    if not isinstance(connections, list) or not all(
        isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c) for c in connections
    ):
        raise AgentloomError("design.connections must be a list of [from, to] node names.")
    missing = sorted({x for c in connections for x in c} - set(nodes))
    if missing:
        raise AgentloomError(f"design.connections name nodes not in design.nodes: {', '.join(missing)}.")
    config = design.get("config", {})
    if not isinstance(config, Mapping):
        raise AgentloomError('design.config must be an object, e.g. {"chatOpenAI": {"temperature": 0.2}}.')
    return {"nodes": list(nodes), "connections": [list(c) for c in connections], "config": dict(config)}


def artifact_metadata(
    bundle: Mapping[str, Any],
    design: dict[str, Any],
    chatflow_id: str | None,
    success: bool,
    reason: str | None,
    catalog: Mapping[str, Mapping[str, Any]],
    created_at: float | None = None,
) -> dict[str, Any]:
    """A stored design's metadata (the record layout above)."""
    versions = {n: catalog[n].get("version") for n in design["nodes"] if n in catalog}
    return {
        "created_at": time.time() if created_at is None else created_at,
        "success": success,
        "rating": 0,
        "chatflow_id": chatflow_id or "",
        "nodes": ",".join(design["nodes"]),
        "node_versions": json.dumps(versions),
        "bundle": json.dumps({**bundle, "design": design}),
        "reason": reason or "",
        "rejections": 0,
        "last_rejection": "",
    }


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(4)}"


class LearningStore:
    def __init__(self, connection: ChromaConnection, embeddings: EmbeddingService, model: str | None) -> None:
        self.connection = connection
        self.embeddings = embeddings
        self.model = model
        self._handles: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- collections ---------------------------------------------------------------------
    def collection(self, name: str) -> Any:
        """Open (or create, with the current model recorded) one of the three collections."""
        with self._lock:
            if name not in self._handles:
                model = self.embeddings.model(self.model).key
                self._handles[name] = open_collection(self.connection, self.embeddings, name, model)
            return self._handles[name]

    def _model_of(self, collection: Any) -> str:
        key = (collection.metadata or {}).get("embedding_model")
        return (
            self.embeddings.require(key, f"collection {collection.name!r}").key
            if key
            else self.embeddings.model(self.model).key
        )

    def _add(self, name: str, record_id: str, text: str, metadata: dict[str, Any]) -> None:
        collection = self.collection(name)
        vector = self.embeddings.embed_documents([text], self._model_of(collection))
        self.connection.call(
            lambda: collection.add(ids=[record_id], documents=[text], embeddings=vector, metadatas=[metadata])
        )

    # -- writing -------------------------------------------------------------------------
    def save(
        self,
        request: str,
        bundle: Mapping[str, Any],
        design: dict[str, Any],
        chatflow_id: str | None,
        success: bool,
        reason: str | None,
        catalog: Mapping[str, Mapping[str, Any]],
        created_at: float | None = None,
    ) -> str:
        if not request.strip():
            raise AgentloomError("request is empty; give the user's request that led to this design.")
        if not success and not (reason and reason.strip()):
            raise AgentloomError("reason is required when success is false: say why the design failed.")
        artifact_id = new_id("a")
        metadata = artifact_metadata(bundle, design, chatflow_id, success, reason, catalog, created_at)
        self._add(ARTIFACTS if success else FAILED, artifact_id, request, metadata)
        return artifact_id

    def record_session(
        self,
        request: str,
        outcome: str,
        tokens: int,
        seconds: float,
        chatflow_id: str | None = None,
        artifact_id: str | None = None,
        created_at: float | None = None,
    ) -> str:
        session_id = new_id("s")
        self._add(
            SESSIONS,
            session_id,
            request or "(no request)",
            {
                "created_at": time.time() if created_at is None else created_at,
                "outcome": outcome,
                "tokens": int(tokens),
                "seconds": round(seconds, 3),
                "chatflow_id": chatflow_id or "",
                "artifact_id": artifact_id or "",
            },
        )
        return session_id

    def get(self, artifact_id: str) -> tuple[str, dict[str, Any]]:
        """(request, metadata) of a stored design; a failed one is not reusable and says so."""
        for name in (ARTIFACTS, FAILED):
            collection = self.collection(name)
            got = self.connection.call(
                functools.partial(collection.get, ids=[artifact_id], include=["documents", "metadatas"])
            )
            if got["ids"]:
                document = column(got["documents"], "documents")[0]
                return document, {**column(got["metadatas"], "metadatas")[0], "collection": name}
        raise NotFoundError(f"artifact_id {artifact_id!r} not found; flowise_find_design returns the ids.")

    def update(self, artifact_id: str, changes: Mapping[str, Any], collection: str | None = None) -> None:
        """Change a stored design's metadata; ``collection`` when the caller has just read it (``get``)."""
        name = collection or self.get(artifact_id)[1]["collection"]
        handle = self.collection(name)
        self.connection.call(lambda: handle.update(ids=[artifact_id], metadatas=[dict(changes)]))

    def rate(self, artifact_id: str, stars: int) -> Rated:
        if not isinstance(stars, int) or not 1 <= stars <= 5:
            raise AgentloomError(f"stars {stars!r} is outside 1-5.")
        self.update(artifact_id, {"rating": stars})
        return {"artifact_id": artifact_id, "rating": stars}

    # -- finding -------------------------------------------------------------------------
    def find(
        self, request: str, catalog: Mapping[str, Mapping[str, Any]] | None, limit: int = 10
    ) -> list[dict[str, Any]]:
        """The designs worth offering for ``request``: above MATCH, best first, ties within TIE kept (≤ 3),
        each checked against ``catalog`` (None: no catalog to check against)."""
        if not request.strip():
            raise AgentloomError("request is empty; describe the chatflow the user wants.")
        collection = self.collection(ARTIFACTS)
        count = self.connection.call(collection.count)
        if count == 0:
            return []
        vector = self.embeddings.embed_query(request, self._model_of(collection))
        answer = self.connection.call(
            lambda: collection.query(
                query_embeddings=[vector], n_results=min(limit, count), include=["metadatas", "distances"]
            )
        )
        candidates = []
        for artifact_id, metadata, distance in zip(
            answer["ids"][0], answer["metadatas"][0], answer["distances"][0], strict=True
        ):
            similarity = 1.0 - float(distance)
            if similarity <= MATCH:
                continue
            rating = int(metadata.get("rating") or 0) or 3
            candidates.append((similarity + RATING_STEP * (rating - 3), similarity, artifact_id, metadata))
        candidates.sort(key=lambda c: -c[0])
        if not candidates:
            return []
        best = candidates[0][0]
        offered = [c for c in candidates if c[0] >= best * (1 - TIE)][:MAX_OFFERED]
        return [
            self._offer(artifact_id, similarity, metadata, catalog) for _, similarity, artifact_id, metadata in offered
        ]

    def _offer(
        self,
        artifact_id: str,
        similarity: float,
        metadata: Mapping[str, Any],
        catalog: Mapping[str, Mapping[str, Any]] | None,
    ) -> dict[str, Any]:
        design = json.loads(metadata["bundle"])["design"]
        offer: dict[str, Any] = {
            "artifact_id": artifact_id,
            "similarity": round(similarity, 3),
            "nodes": design["nodes"],
            "connections": design["connections"],
        }
        if design.get("config"):
            offer["config"] = design["config"]
        if metadata.get("rating"):
            offer["rating"] = int(metadata["rating"])
        known = catalog if catalog is not None else {}
        names = list(dict.fromkeys(design["nodes"])) if catalog is not None else []
        missing = [n for n in names if n not in known]
        deprecated = [n for n in names if known.get(n, {}).get("badge") == "DEPRECATING"]
        if missing:
            offer["missing"] = missing
        if deprecated:
            offer["deprecated"] = deprecated
        offer["created"] = iso(float(metadata["created_at"]))[:10]
        return offer
