"""Collections and documents in Chroma, with all-or-nothing document writes.

A document is a set of chunks tagged with the document id and a *generation* (the write's
start time in nanoseconds, never reused for that document). The manifest (a small Chroma
collection of its own) names the current generation of every document; it is the commit
point. Adding or updating writes the new generation's chunks, then flips the manifest (one
write for all the documents of a call: they commit together), then removes every other
generation of those documents. A reader never sees a mix of old and new,
and a failure at any step leaves the previous version whole.

**Leftovers of a crash.** A kill between the first chunk written and the last one removed
leaves chunks of a generation that is not current (the new one before the flip, the old
one after it). They are never shown, never crowd out current chunks, and do not stay:

- *Search filters by generation inside the Chroma query*, not after the top-n cut (see
  search.py). A query runs with the caller's filter; when a hit is not current, the query
  runs again with a guard that admits, for each document found with stale chunks, only its
  current ``(document_id, generation)`` pair, and leaves every other document unrestricted::

      {"$or": [{"document_id": {"$nin": [d1, d2]}},
               {"$and": [{"document_id": {"$eq": d1}}, {"generation": {"$eq": g1}}]}, ...]}

  until the top n are all current (a few rounds at most; the searcher remembers such
  documents per collection, so later searches start guarded). A clean collection, the
  normal case, costs one query with no guard. (A ``committed`` flag set at commit was the
  alternative; it costs a metadata update of every chunk on every write and cannot change
  atomically with the manifest, so a crash between the two leaves the same problem.)
  Candidates found in Python (``$contains`` on metadata) and the BM25 index keep only
  current chunks, exactly.
- *Cleanup.* A document's next write removes every other generation of it. The first time
  a collection is used for a document or a search after a start (not by listing or
  ``health``), the store compares its chunk count with the manifest's; if they differ, it
  removes the chunks whose generation is not current and which no running write can still
  commit: in embedded mode (one writer, this process) every such chunk written before this
  store started; in remote mode (other servers may be mid-write) those older than
  ``stale_write_seconds`` (an hour by default).
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentloom.core.dependency import first_line
from agentloom.core.errors import AgentloomError, ConfigError, NotFoundError
from agentloom.core.timestamps import iso
from agentloom.core.work import current
from agentloom.embeddings import EmbeddingService
from agentloom.packs.vectors.records import (
    MANIFEST,
    DocumentRecord,
    NewDocument,
    check_collection_name,
    check_metadata,
    chunk_id,
    manifest_id,
    record_of,
)
from agentloom.packs.vectors.replies import CollectionInfo, Deleted, DeletedDocument
from agentloom.packs.vectors.settings import VectorSettings
from agentloom.retrieval.connection import ChromaConnection

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Embeddable, EmbeddingFunction, Metadata

    from agentloom.packs.vectors.chunking import Chunk

log = logging.getLogger(__name__)

_DUMMY = [0.0]  # manifest rows carry no meaningful vector
EMBED_WINDOW = 256  # chunks embedded and written together: full model batches, bounded memory


class VectorStore:
    def __init__(self, settings: VectorSettings, connection: ChromaConnection, embeddings: EmbeddingService) -> None:
        self.settings = settings
        self.connection = connection
        self.embeddings = embeddings
        self._write_lock = threading.Lock()  # guards generations, the manifest and _writing
        self._writing: set[tuple[str, str]] = set()  # (collection, document id) of writes not yet committed
        # Embedded Chroma has one writer (this process), so current generations can be remembered;
        # a server may have other writers, so there every search asks the manifest.
        self._generations: dict[tuple[str, str], int | None] | None = {} if settings.mode == "embedded" else None
        self.changed: list[Callable[[str], None]] = []  # listeners (the lexical index cache)
        self.started_ns = time.time_ns()
        self._swept: set[str] = set()  # collections checked for leftovers since this store started
        self._capped: set[tuple[str, int]] = set()  # (model, chunk_size) capped and logged once
        self._max_batch: int | None = None
        # Open collections, in embedded mode only (this process is the only writer, so a handle
        # cannot go stale behind its back): opening one costs a catalog read on every call.
        self._handles: dict[str, Collection] | None = {} if settings.mode == "embedded" else None

    # -- model: each collection is embedded and searched with the model that built it ----------
    def model(self) -> tuple[str, int]:
        """The model new collections are built with (the configured one, or the default)."""
        record = self.embeddings.model(self.settings.embedding_model)
        return record.key, record.dimensions

    def _ef(self) -> EmbeddingFunction[Embeddable]:
        from agentloom.retrieval.embedding_function import for_collection

        return for_collection(self.embeddings, self.settings.embedding_model)

    def collection_model(self, collection: Collection) -> str:
        """The key of the model that built the collection; a model that cannot be loaded is an error
        naming the way out. A collection agentloom did not create uses the configured model."""
        meta = collection.metadata or {}
        key, dims = meta.get("embedding_model"), meta.get("embedding_dimensions")
        if not isinstance(key, str) or not key:
            key, current = self.model()
        else:
            current = self.embeddings.require(key, f"collection {collection.name!r}").dimensions
        if dims is not None and int(dims) != current:
            raise AgentloomError(
                f"collection {collection.name!r} holds {dims}-dimensional vectors, but model {key!r} makes "
                f"{current}-dimensional ones; they cannot be compared. Re-create the collection."
            )
        return key

    # -- collections -------------------------------------------------------------------
    def _client(self) -> ClientAPI:
        return self.connection.client()

    def manifest(self) -> Collection:
        client = self._client()
        return self.connection.call(lambda: client.get_or_create_collection(MANIFEST))

    def _on_manifest(self, operation: Callable[[Collection], Any]) -> Any:
        """One guarded operation on the manifest (opening it is a guarded call of its own)."""
        manifest = self.manifest()
        return self.connection.call(lambda: operation(manifest))

    def collection(self, name: str, *, sweep: bool = True) -> Collection:
        """Open a collection; the first time after a start, remove what crashed writes left in it."""
        check_collection_name(name)
        cached = self._handles.get(name) if self._handles is not None else None
        if cached is not None:
            return cached
        client = self._client()

        def get() -> Collection:
            try:
                return client.get_collection(name, embedding_function=self._ef())
            except Exception as exc:
                if "does not exist" in str(exc) or type(exc).__name__ == "NotFoundError":
                    raise NotFoundError(
                        f"collection {name!r} not found; vector_list_collections shows the existing ones."
                    ) from None
                raise

        collection = self.connection.call(get)
        if sweep and name not in self._swept:
            self._sweep(collection)
        if self._handles is not None and name in self._swept:  # swept: nothing left to do on opening
            self._handles[name] = collection
        return collection

    def create_collection(self, name: str, metadata: Mapping[str, Any] | None = None) -> CollectionInfo:
        check_collection_name(name)
        user = check_metadata(metadata)
        key, dims = self.model()
        meta = {**user, "embedding_model": key, "embedding_dimensions": dims, "created_at": time.time()}
        client = self._client()

        def create() -> Collection:
            try:
                return client.create_collection(
                    name,
                    metadata=meta,
                    embedding_function=self._ef(),
                    configuration={"hnsw": {"space": "cosine", "ef_search": self.settings.hnsw_ef_search}},
                )
            except Exception as exc:
                if "already exists" in str(exc):
                    raise AgentloomError(
                        f"collection {name!r} already exists; choose another name or delete it first."
                    ) from None
                raise

        collection = self.connection.call(create)
        return self.describe(collection)

    def describe(self, collection: Collection) -> CollectionInfo:
        meta = dict(collection.metadata or {})
        # Committed documents only: the chunks of a write still running (or rolled back) are not counted.
        rows = self._on_manifest(lambda m: m.get(where={"collection": collection.name}, include=["metadatas"]))
        return {
            "name": collection.name,
            "chunk_count": sum(int(m["chunk_count"]) for m in rows["metadatas"]),
            "document_count": len(rows["ids"]),
            "embedding_model": meta.pop("embedding_model", None),
            "embedding_dimensions": meta.pop("embedding_dimensions", None),
            "created_at": iso(meta.pop("created_at")) if "created_at" in meta else None,
            "metadata": meta,
        }

    def list_collections(self) -> list[CollectionInfo]:
        client = self._client()
        names = sorted(c.name for c in self.connection.call(client.list_collections) if c.name != MANIFEST)
        return [self.describe(self.collection(name, sweep=False)) for name in names]

    def delete_collection(self, name: str) -> Deleted:
        self.collection(name, sweep=False)  # not found -> clear error
        client = self._client()
        with self._write_lock:
            self.connection.call(lambda: client.delete_collection(name))
            if self._handles is not None:
                self._handles.pop(name, None)
            self._on_manifest(lambda m: m.delete(where={"collection": name}))
            self._remember(name, None, None)
            self._swept.discard(name)
        self._notify(name)
        return {"name": name, "deleted": True}

    # -- documents ---------------------------------------------------------------------
    def document(self, collection: str, document_id: str) -> DocumentRecord | None:
        return self.documents(collection, [document_id]).get(document_id)

    def documents(self, collection: str, document_ids: list[str] | None = None) -> dict[str, DocumentRecord]:
        """The manifest records of these documents (those that exist), or of every document."""
        if document_ids is None:
            got = self._on_manifest(lambda m: m.get(where={"collection": collection}, include=["metadatas"]))
        elif not document_ids:
            return {}
        else:
            wanted = [manifest_id(collection, d) for d in document_ids]
            got = self._on_manifest(lambda m: m.get(ids=wanted, include=["metadatas"]))
        records = (record_of(meta) for meta in got["metadatas"])
        return {r.document_id: r for r in records}

    def max_batch(self) -> int:
        """Chroma's limit of records per write (asked once)."""
        if self._max_batch is None:
            self._max_batch = max(1, int(self.connection.call(self._client().get_max_batch_size)))
        return self._max_batch

    def current_generations(self, collection: str, document_ids: set[str]) -> dict[str, int]:
        known = self._generations
        wanted = document_ids if known is None else {d for d in document_ids if (collection, d) not in known}
        fetched: dict[str, int] = {}
        if wanted:
            got = self._on_manifest(
                lambda m: m.get(ids=[manifest_id(collection, d) for d in wanted], include=["metadatas"])
            )
            fetched = {m["document_id"]: int(m["generation"]) for m in got["metadatas"]}
        if known is None:
            return fetched
        with self._write_lock:
            for d in wanted:
                known.setdefault((collection, d), fetched.get(d))
            return {d: g for d in document_ids if (g := known.get((collection, d))) is not None}

    def generations(self, collection: str) -> dict[str, int]:
        """Every document's current generation in a collection (one manifest read)."""
        got = self._on_manifest(lambda m: m.get(where={"collection": collection}, include=["metadatas"]))
        return {m["document_id"]: int(m["generation"]) for m in got["metadatas"]}

    def _remember(self, collection: str, document_id: str | None, generation: int | None) -> None:
        """Record a committed write (callers hold the write lock); None forgets a whole collection."""
        if self._generations is None:
            return
        if document_id is None:
            for key in [k for k in self._generations if k[0] == collection]:
                del self._generations[key]
        else:
            self._generations[(collection, document_id)] = generation

    def prepare(
        self,
        model_key: str,
        text: object,
        document_id: object = None,
        metadata: Mapping[str, Any] | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
    ) -> NewDocument:
        """Check one document and cut it into chunks for ``model_key``; nothing is written."""
        if not isinstance(text, str) or not text.strip():
            raise AgentloomError("text is empty: pass the document's text (at least one non-space character).")
        doc_id = document_id if document_id is not None else uuid.uuid4().hex
        if not isinstance(doc_id, str) or not doc_id.strip() or len(doc_id) > 512:
            raise AgentloomError("document_id must be a non-empty string of at most 512 characters.")
        user = check_metadata(metadata)
        size = chunk_size or self.settings.chunk_size
        overlap = self.settings.chunk_overlap if chunk_overlap is None else chunk_overlap
        if overlap >= size:
            raise ConfigError(f"chunk_overlap ({overlap}) must be smaller than chunk_size ({size}).")
        max_tokens = self.embeddings.max_tokens(model_key) or 8192
        if overlap >= max_tokens - 2:
            raise ConfigError(
                f"chunk_overlap ({overlap}) must be smaller than the chunks model {model_key!r} can read "
                f"({max_tokens - 2} tokens, its input limit less two special tokens); lower chunk_overlap."
            )
        from agentloom.packs.vectors.chunking import (  # numpy: not on the server's start path
            check_unicode,
            chunk_sections,
        )

        readable = max_tokens - 2
        warning = None
        if size > readable:
            # A longer chunk would be cut by the model (its tail never embedded, so never found): cap it.
            warning = (
                f"chunk_size {size} is beyond what model {model_key!r} reads ({max_tokens} tokens, 2 of them "
                f"special): chunks were capped at {readable} tokens so that no text goes unembedded; pass "
                f"chunk_size <= {readable} for this model."
            )
            if (model_key, size) not in self._capped:
                self._capped.add((model_key, size))
                log.warning("vectors: %s", warning)
        check_unicode(text)  # every document of a bulk add is checked before anything is written
        split = functools.partial(
            chunk_sections,
            tokenizer=self.embeddings.tokenizer(model_key),
            chunk_tokens=min(size, readable),
            overlap_tokens=overlap,
            max_tokens=max_tokens,
        )
        return NewDocument(doc_id, user, text, split, warning)

    def add_document(
        self,
        collection_name: str,
        text: str,
        document_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        *,
        must_exist: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        collection = self.collection(collection_name)
        key = self.collection_model(collection)
        document = self.prepare(key, text, document_id, metadata, chunk_size, chunk_overlap)
        return self.write(collection, key, [document], must_exist=must_exist, progress=progress)[0]

    def write(
        self,
        collection: Collection,
        model_key: str,
        documents: list[NewDocument],
        *,
        must_exist: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Chunk, embed and store several documents, then commit them all with one manifest write
        (see the module docstring). Chunks go ``EMBED_WINDOW`` at a time: embedded in full batches,
        written to Chroma, then let go, so memory does not grow with the text. ``progress(chunks,
        characters)`` after each embedding batch; the current work (``core.work``) may stop it there.
        A failure or a cancel before the commit removes what was written: previous versions stay whole."""
        if not documents:
            return []
        name = collection.name
        ids_in_call = [d.document_id for d in documents]
        with self._write_lock:
            previous = self.documents(name, ids_in_call)
            if must_exist and (missing := [d for d in ids_in_call if d not in previous]):
                raise NotFoundError(
                    f"document {missing[0]!r} not found in collection {name!r}; add it with vector_add_document."
                )
            busy = [d for d in ids_in_call if (name, d) in self._writing]
            if busy:
                raise AgentloomError(
                    f"document {busy[0]!r} is being written by another call right now; retry when that call ends."
                )
            self._writing.update((name, d) for d in ids_in_call)
            now = time.time()
            # Unique, not previous + 1: a crash may have left chunks of an uncommitted "next" generation.
            generation = max([time.time_ns()] + [p.generation + 1 for p in previous.values()])
        created = {d: previous[d].created_at if d in previous else now for d in ids_in_call}
        try:
            try:
                counts = self._add_chunks(collection, model_key, documents, generation, created, now, progress)
                manifest: list[Metadata] = [
                    {
                        "collection": name,
                        "document_id": d.document_id,
                        "generation": generation,
                        "chunk_count": counts[d.document_id],
                        "created_at": created[d.document_id],
                        "updated_at": now,
                        "embedding_model": model_key,
                        "metadata_json": json.dumps(d.metadata, sort_keys=True),
                    }
                    for d in documents
                ]
                dummies: list[Sequence[float] | Sequence[int]] = [_DUMMY] * len(manifest)
                current().check()  # the last moment a cancel keeps the previous versions
                with self._write_lock:
                    # The commit point: one write flips every document of the call to the new generation.
                    self._on_manifest(
                        lambda m: m.upsert(
                            ids=[manifest_id(name, d) for d in ids_in_call],
                            embeddings=dummies,
                            metadatas=manifest,
                        )
                    )
                    for d in ids_in_call:
                        self._remember(name, d, generation)
            except Exception as exc:
                # Roll back this generation; the previous ones (if any) are still current.
                self._drop(collection, {"$and": [{"document_id": {"$in": ids_in_call}}, {"generation": generation}]})
                if isinstance(exc, (ValueError, TypeError)) or chroma_refused(exc):
                    shown = (
                        ids_in_call[0]
                        if len(ids_in_call) == 1
                        else f"{ids_in_call[0]} (and {len(ids_in_call) - 1} more)"
                    )
                    raise AgentloomError(
                        f"Chroma refused document {shown!r} ({first_line(exc)}); the previous version, if any, "
                        "is unchanged. Check the metadata keys and values."
                    ) from None
                raise
            # Every other generation of these documents: previous versions, and what crashed writes left.
            self._drop(
                collection, {"$and": [{"document_id": {"$in": ids_in_call}}, {"generation": {"$ne": generation}}]}
            )
        finally:
            with self._write_lock:
                self._writing.difference_update((name, d) for d in ids_in_call)
        self._notify(name)
        return [
            {
                "document_id": d.document_id,
                "chunk_count": counts[d.document_id],
                "chunk_ids": [chunk_id(d.document_id, generation, i) for i in range(counts[d.document_id])],
                "replaced": d.document_id in previous,
                "embedding_model": model_key,
                **({"warning": d.warning} if d.warning else {}),
            }
            for d in documents
        ]

    def _add_chunks(
        self,
        collection: Collection,
        model_key: str,
        documents: list[NewDocument],
        generation: int,
        created: Mapping[str, float],
        now: float,
        progress: Callable[[int, int], None] | None,
    ) -> dict[str, int]:
        """Write every chunk of the documents under ``generation`` (not yet current); chunks per document."""
        counts = dict.fromkeys((d.document_id for d in documents), 0)
        pending: list[tuple[str, str, dict[str, Any]]] = []
        chunks = characters = reached = 0  # chunks written; characters chunked, and written
        work = current()

        def embedded(done: int, _total: int) -> None:
            # within a window: its characters counted in proportion to the chunks embedded
            if progress is not None:
                progress(chunks + done, round(reached + (characters - reached) * done / len(pending)))
            work.check()

        def flush() -> None:
            nonlocal chunks, reached
            vectors = self.embeddings.embed_documents([r[1] for r in pending], model_key, embedded)
            batch = self.max_batch()
            for start in range(0, len(pending), batch):
                part = pending[start : start + batch]
                metadatas: list[Metadata] = [r[2] for r in part]
                self.connection.call(
                    functools.partial(
                        collection.add,
                        ids=[r[0] for r in part],
                        embeddings=vectors[start : start + len(part)],
                        documents=[r[1] for r in part],
                        metadatas=metadatas,
                    )
                )
            chunks += len(pending)
            reached = characters
            pending.clear()
            work.check()

        before = 0  # characters of the documents already chunked
        for document in documents:
            for section in document.sections():
                work.check()
                pending.extend(
                    self._chunk_rows(document, section, created[document.document_id], model_key, generation, now)
                )
                counts[document.document_id] += len(section)
                characters = before + (section[-1].end if section else 0)
                if len(pending) >= EMBED_WINDOW:
                    flush()
            before += len(document.text)
            characters = before
        if pending:
            flush()
        return counts

    @staticmethod
    def _chunk_rows(
        document: NewDocument, chunks: list[Chunk], created: float, key: str, generation: int, now: float
    ) -> list[tuple[str, str, dict[str, Any]]]:
        return [
            (
                chunk_id(document.document_id, generation, c.index),
                c.text,
                {
                    **document.metadata,
                    "document_id": document.document_id,
                    "chunk_index": c.index,
                    "start": c.start,
                    "end": c.end,
                    "tokens": c.tokens,
                    "created_at": created,
                    "updated_at": now,
                    "embedding_model": key,
                    "generation": generation,
                },
            )
            for c in chunks
        ]

    def _drop(self, collection: Collection, where: dict[str, Any]) -> None:
        """Best effort: leftovers are invisible to search (wrong generation), so failure is only logged."""
        try:
            self.connection.call(lambda: collection.delete(where=where))
        except Exception as exc:
            log.warning("could not remove stale chunks (%s) in %s: %s", where, collection.name, exc)

    def _sweep(self, collection: Collection) -> None:
        """Remove what interrupted writes left in a collection (see the module docstring); once per start."""
        name = collection.name
        with self._write_lock:
            if name in self._swept:
                return
            try:
                removed = self._remove_leftovers(collection)
            except Exception as exc:
                log.warning("could not check collection %s for chunks left by interrupted writes: %s", name, exc)
                return
            self._swept.add(name)
        if removed:
            log.info("removed %d chunks left by interrupted writes from collection %s", removed, name)
            self._notify(name)

    def _remove_leftovers(self, collection: Collection) -> int:
        rows = self._on_manifest(lambda m: m.get(where={"collection": collection.name}, include=["metadatas"]))
        if self.connection.call(collection.count) == sum(int(m["chunk_count"]) for m in rows["metadatas"]):
            return 0  # every chunk belongs to a current generation: the normal case, no scan
        current = {m["document_id"]: int(m["generation"]) for m in rows["metadatas"]}
        if self.settings.mode == "embedded":
            before = self.started_ns  # one writer: a write from before this start is over
        else:
            before = time.time_ns() - int(self.settings.stale_write_seconds * 1e9)
        got = self.connection.call(lambda: collection.get(include=["metadatas"]))
        stale = [i for i, m in zip(got["ids"], got["metadatas"] or []) if _abandoned(m or {}, current, before)]
        batch = self.max_batch()
        for start in range(0, len(stale), batch):
            part: list[str] = stale[start : start + batch]
            self.connection.call(functools.partial(collection.delete, ids=part))
        return len(stale)

    def delete_document(self, collection_name: str, document_id: str) -> DeletedDocument:
        collection = self.collection(collection_name)
        with self._write_lock:
            if (collection_name, document_id) in self._writing:
                raise AgentloomError(
                    f"document {document_id!r} is being written by another call right now; "
                    "delete it when that call ends."
                )
            record = self.document(collection_name, document_id)
            if record is None:
                raise NotFoundError(f"document {document_id!r} not found in collection {collection_name!r}.")
            # The manifest row is the commit point: once it is gone, no chunk of the document is visible.
            self._on_manifest(lambda m: m.delete(ids=[manifest_id(collection_name, document_id)]))
            self._remember(collection_name, document_id, None)
            self._drop(collection, {"document_id": document_id})
        self._notify(collection_name)
        return {"document_id": document_id, "deleted_chunks": record.chunk_count}

    def _notify(self, collection: str) -> None:
        for listener in self.changed:
            listener(collection)


def chroma_refused(exc: BaseException) -> bool:
    """Chroma's answer to a bad request (a 4xx), as opposed to a failure of Chroma itself."""
    code = getattr(exc, "code", None)
    try:
        status = int(code()) if callable(code) else None
    except Exception:
        return False
    return status is not None and 400 <= status < 500 and type(exc).__name__ != "NotFoundError"


def _abandoned(meta: Mapping[str, Any], current: Mapping[str, int], before: int) -> bool:
    """A chunk of a generation that is not its document's current one, written before `before` (ns)."""
    doc, generation = meta.get("document_id"), meta.get("generation")
    if not isinstance(doc, str) or not isinstance(generation, int) or isinstance(generation, bool):
        return False  # not written by agentloom: not ours to remove
    return current.get(doc) != generation and generation < before
