"""The MCP tools of the vectors pack."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired

from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError
from agentloom.core.health import Check
from agentloom.core.work import count, current
from agentloom.server.packs import Pack, PackContext
from agentloom.server.roots import client_roots
from agentloom.server.work import run_work

if TYPE_CHECKING:
    from agentloom.packs.vectors.search import Searcher
    from agentloom.packs.vectors.settings import VectorSettings
    from agentloom.packs.vectors.store import VectorStore

log = logging.getLogger(__name__)

pack = Pack(
    "vectors",
    "ChromaDB collections, chunked documents, semantic and hybrid search with filters",
    requires=["chromadb", "bm25s", "Stemmer"],
    install="'agentloom[vectors]'",
)


class CollectionInfo(TypedDict):
    name: str
    chunk_count: int
    document_count: int
    embedding_model: str | None
    embedding_dimensions: int | None
    created_at: str | None
    metadata: dict[str, Any]


class CollectionList(TypedDict):
    collections: list[CollectionInfo]


class Deleted(TypedDict):
    name: str
    deleted: bool


class AddedDocument(TypedDict):
    document_id: str
    chunk_count: int
    replaced: bool
    embedding_model: str
    chunk_ids: NotRequired[list[str]]
    warning: NotRequired[str]  # chunk_size beyond what the model reads: capped


class AddedDocuments(TypedDict):
    added: int
    replaced: int
    total_chunks: int
    documents: list[AddedDocument]
    warning: NotRequired[str]  # chunk_size beyond what the model reads: capped (said once, not per document)


class AddedFile(TypedDict):
    document_id: str
    path: str
    chunk_count: int
    replaced: bool


class SkippedFile(TypedDict):
    path: str
    reason: str


class AddedFiles(TypedDict):
    added: int
    replaced: int
    total_chunks: int
    embedding_model: str
    documents: list[AddedFile]
    skipped: list[SkippedFile]
    warning: NotRequired[str]  # chunk_size beyond what the model reads: capped


class NewDocumentInput(BaseModel):
    """One document of vector_add_documents."""

    model_config = ConfigDict(extra="forbid")
    text: str
    document_id: str | None = None
    metadata: dict[str, str | int | float | bool] | None = None


class SearchHit(TypedDict):
    document_id: str
    chunk_id: str
    text: str
    metadata: dict[str, Any]
    score: float


class SearchResult(TypedDict):
    collection: str
    mode: Literal["vector", "hybrid"]
    results: list[SearchHit]
    message: str | None
    warnings: list[str]


class DeletedDocument(TypedDict):
    document_id: str
    deleted_chunks: int


class ListedDocument(TypedDict):
    document_id: str
    title: str
    chunk_count: int
    metadata: dict[str, Any]
    created_at: str
    updated_at: str


class DocumentList(TypedDict):
    collection: str
    documents: list[ListedDocument]
    total: int
    next_cursor: str | None


class DocumentText(TypedDict):
    document_id: str
    collection: str
    text: str
    offset: int
    total_characters: int
    next_offset: int | None
    metadata: dict[str, Any]
    embedding_model: str
    chunk_count: int
    created_at: str
    updated_at: str


class DocumentInfo(TypedDict):
    document_id: str
    collection: str
    metadata: dict[str, Any]
    embedding_model: str
    created_at: str
    updated_at: str
    chunk_count: int
    chunk_ids: list[str]
    total_characters: int
    chunk_tokens: dict[str, float]
    chunk_characters: dict[str, float]


class Vectors:
    """The pack's state: the store, and the searcher (built on first search: it imports BM25)."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self._searcher: Searcher | None = None
        self._lock = threading.Lock()

    @property
    def searcher(self) -> Searcher:
        with self._lock:
            if self._searcher is None:
                from agentloom.packs.vectors.search import Searcher

                self._searcher = Searcher(self.store)
            return self._searcher


@pack.setup
def setup(ctx: PackContext) -> Vectors:
    from agentloom.packs.vectors.connection import ChromaConnection
    from agentloom.packs.vectors.settings import VectorSettings
    from agentloom.packs.vectors.store import VectorStore

    settings = ctx.config(VectorSettings)
    if settings.mode == "embedded" and settings.path is None:
        settings = settings.model_copy(update={"path": ctx.data_dir / "chroma"})
    store = VectorStore(settings, ChromaConnection(settings, ctx.breakers), ctx.embeddings)
    ctx.log.info("vectors: %s, chunks of %d tokens", settings.describe(), settings.chunk_size)
    return Vectors(store)


@pack.health
def health(vectors: Vectors) -> list[Check]:
    store = vectors.store
    try:
        names = store.list_collections()
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return [Check(f"vector store ({store.connection.where})", False, str(exc))]
    return [Check(f"vector store ({store.connection.where})", True, f"{len(names)} collections")]


async def _run(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return await run_work(getattr(fn, "__name__", "vectors"), lambda: fn(*args, **kwargs))


def check_size(settings: VectorSettings, texts: list[str], what: str) -> None:
    """Refuse text over ``max_text_mb`` at once, before any work (counting characters first: no copy)."""
    limit = int(settings.max_text_mb * 1_000_000)
    characters = sum(len(t) for t in texts)
    if characters * 4 <= limit:
        return  # fits even at 4 bytes a character
    size = characters if characters > limit else sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    if size > limit:
        shown = f"{'at least ' if size == characters and characters > limit else ''}{size / 1e6:,.1f} MB"
        raise AgentloomError(
            f"{what} is {shown} of UTF-8, over this server's limit of {settings.max_text_mb:g} MB per call. "
            "Split it over several calls, add it from a file with vector_add_files, or raise the limit: "
            "setting max_text_mb (AGENTLOOM_VECTORS__MAX_TEXT_MB=50, or max_text_mb = 50 under "
            "[pack_settings.vectors] in agentloom.toml)."
        )


def chunk_progress(total: int) -> Callable[[int, int], None]:
    """store.write's progress callback for one document of ``total`` characters."""
    work = current()
    started = time.monotonic()

    def report(chunks: int, characters: int) -> None:
        rate = chunks / max(time.monotonic() - started, 1e-3)
        estimate = max(round(chunks * total / characters), chunks) if characters else chunks
        work.step(characters, total, f"embedded {count(chunks)} of about {count(estimate)} chunks "
                  f"({characters / 1e6:,.1f} of {total / 1e6:,.1f} M characters, {rate:,.0f} chunks/s)")

    return report


@pack.tool(idempotent=False)
async def vector_create_collection(vectors: Vectors, name: str, metadata: dict[str, str | int | float | bool] | None = None) -> CollectionInfo:
    """Create a collection. Names: 3-63 letters, digits, '.', '_' or '-'. An existing name is an error.
    The collection records the embedding model and dimension it is built with."""
    return await _run(vectors.store.create_collection, name, metadata)


@pack.tool(read_only=True)
async def vector_list_collections(vectors: Vectors) -> CollectionList:
    """List collections with their chunk and document counts, metadata and embedding model."""
    return {"collections": await _run(vectors.store.list_collections)}


@pack.tool(destructive=True, idempotent=False)
async def vector_delete_collection(vectors: Vectors, name: str) -> Deleted:
    """Delete a collection and every document and chunk in it."""
    return await _run(vectors.store.delete_collection, name)


@pack.tool()
async def vector_add_document(
    vectors: Vectors,
    collection: str,
    text: str,
    document_id: str | None = None,
    metadata: dict[str, str | int | float | bool] | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    include_chunk_ids: bool = False,
) -> AddedDocument:
    """Add a text document: it is split into chunks (sizes in the embedding model's tokens, preferring
    paragraph and sentence boundaries), embedded with the collection's model and stored. Without
    document_id one is generated. Adding an existing document_id replaces that document as one unit
    (never duplicate chunks). Metadata values must be strings, numbers or booleans. The reply gives
    counts; include_chunk_ids adds the chunk ids."""
    from agentloom.packs.vectors.ingest import compact

    store = vectors.store
    check_size(store.settings, [text], "text")

    def add() -> dict[str, Any]:
        target = store.collection(collection)
        key = store.collection_model(target)
        current().note(f"splitting {len(text) / 1e6:,.1f} M characters into chunks")
        document = store.prepare(key, text, document_id, metadata, chunk_size, chunk_overlap)
        return store.write(target, key, [document], progress=chunk_progress(len(text)))[0]

    added = await run_work(f"vector_add_document into {collection!r}", add)
    return compact(added, include_chunk_ids)  # type: ignore[return-value]


@pack.tool()
async def vector_add_documents(
    vectors: Vectors, ctx: Context, collection: str, documents: list[NewDocumentInput], include_chunk_ids: bool = False,
) -> AddedDocuments:
    """Add many text documents in one call (up to 1,000: [{"text": ..., "document_id": ..., "metadata": {...}}]);
    their chunks are embedded together, which is much faster than one call per document. Every
    document is checked before anything is written; each is then stored as one unit, replacing a
    document with the same id. Progress is reported per document."""
    from agentloom.packs.vectors.ingest import compact, text_windows

    store = vectors.store
    check_size(store.settings, [d.text for d in documents], "documents (all texts together)")
    items = [d.model_dump() for d in documents]

    def add() -> list[AddedDocument]:
        work = current()
        target = store.collection(collection)
        key = store.collection_model(target)
        written: list[AddedDocument] = []
        for window in text_windows(store, key, items):
            size = sum(len(d.text) for d in window) or 1

            def report(chunks: int, characters: int) -> None:
                # progress in documents (a window's share as it goes), as the docstring says
                work.step(len(written) + len(window) * min(characters / size, 0.99), len(items),
                          f"{count(len(written))} of {count(len(items))} documents stored; "
                          f"embedding the next {count(len(window))} ({count(chunks)} chunks so far)")

            for result in store.write(target, key, window, progress=report):
                written.append(compact(result, include_chunk_ids))  # type: ignore[arg-type]
            work.step(len(written), len(items), f"{count(len(written))} of {count(len(items))} documents stored")
        return written

    written = await run_work(f"vector_add_documents into {collection!r}", add)
    replaced = sum(d["replaced"] for d in written)
    warnings = {d.pop("warning") for d in written if "warning" in d}
    reply: AddedDocuments = {"added": len(written) - replaced, "replaced": replaced,
                             "total_chunks": sum(d["chunk_count"] for d in written), "documents": written}
    if warnings:
        reply["warning"] = warnings.pop()
    return reply


@pack.tool()
async def vector_add_files(
    vectors: Vectors,
    ctx: Context,
    collection: str,
    paths: list[str],
    patterns: list[str] | None = None,
    metadata: dict[str, str | int | float | bool] | None = None,
) -> AddedFiles:
    """Add files and folders. By default it reads Markdown, plain text and reST (*.md, *.markdown, *.txt, *.rst); `patterns` like ["*.py"] choose others.
    Only files inside the allowed folders are read: the client's roots and the server's configured
    folders (AGENTLOOM_VECTORS__FILE_ROOTS; by default its working directory); a relative path is looked
    up in them. A file's document id is its path relative to the allowed folder holding it (e.g.
    "docs/guide.md"), whichever folder of it you pass; adding a file again replaces its document, and an
    id already holding another file is never overwritten (that file is skipped with the reason).
    Unreadable or binary files are skipped with the reason; progress is reported per file."""
    from agentloom.packs.vectors.files import allowed_roots, expand
    from agentloom.packs.vectors.ingest import file_windows

    store = vectors.store
    roots = allowed_roots(await client_roots(ctx), store.settings.file_roots, Path.cwd())
    added: list[AddedFile] = []
    skipped: list[SkippedFile] = []
    warning: str | None = None
    key = ""

    def add() -> None:
        nonlocal warning, key
        work = current()
        target = store.collection(collection)  # an unknown or invalid collection is refused, not "skipped"
        key = store.collection_model(target)
        work.note("listing files")
        files = list(expand(paths, patterns, roots))
        for window in file_windows(store, target, key, files, metadata):
            skipped.extend({"path": s.path, "reason": s.reason} for s in window.skipped)
            seen = len(added) + len(skipped)

            def report(chunks: int, _characters: int) -> None:
                work.step(seen, len(files), f"{count(seen)} of {count(len(files))} files done; "
                          f"embedding the next {count(len(window.documents))} ({count(chunks)} chunks so far)")

            for result in store.write(target, key, window.documents, progress=report):
                doc_id = result["document_id"]
                added.append({"document_id": doc_id, "path": window.paths[doc_id], "chunk_count": result["chunk_count"],
                              "replaced": result["replaced"]})
                warning = result.get("warning", warning)
            done = len(added) + len(skipped)
            work.step(done, len(files), f"{count(done)} of {count(len(files))} files done")

    await run_work(f"vector_add_files into {collection!r}", add)
    replaced = sum(d["replaced"] for d in added)
    reply: AddedFiles = {"added": len(added) - replaced, "replaced": replaced,
                         "total_chunks": sum(d["chunk_count"] for d in added), "embedding_model": key,
                         "documents": added, "skipped": skipped}
    if warning:
        reply["warning"] = warning
    return reply


@pack.tool(read_only=True)
async def vector_search(
    vectors: Vectors,
    collection: str,
    query: str,
    n: int = 5,
    filter: dict[str, Any] | None = None,
    document_contains: str | None = None,
    hybrid: bool = False,
    one_per_document: bool = False,
    min_score: float | None = None,
) -> SearchResult:
    """Semantic search: the chunks closest to `query`, best first, each with a relevance score in [0, 1]
    (cosine similarity), searched with the model that built the collection. `filter` restricts chunks
    before the search, in the form Chroma users know:
    {"field": value}, {"field": {"$ne"|"$gt"|"$gte"|"$lt"|"$lte": v}}, {"field": {"$in": [..]}},
    {"field": {"$contains": "substring"}}; several keys or {"$and": [...]} combine with AND, {"$or": [...]} with OR; created_at and
    updated_at accept ISO dates. `document_contains` keeps chunks whose text contains a substring.
    `hybrid` fuses keyword (BM25) and vector rankings; `one_per_document` keeps each document's best chunk;
    `min_score` drops results scoring below it. The same text never comes back twice."""
    return await _run(vectors.searcher.search, collection, query, n, filter, document_contains, hybrid,
                      one_per_document, min_score)


@pack.tool(idempotent=True)
async def vector_update_document(
    vectors: Vectors,
    collection: str,
    document_id: str,
    text: str,
    metadata: dict[str, str | int | float | bool] | None = None,
    include_chunk_ids: bool = False,
) -> AddedDocument:
    """Replace an existing document's text and metadata. Its chunks are swapped as one unit: searches see
    either the old or the new version, never a mix, and a failure keeps the old version whole."""
    from agentloom.packs.vectors.ingest import compact

    store = vectors.store
    check_size(store.settings, [text], "text")

    def update() -> dict[str, Any]:
        target = store.collection(collection)
        key = store.collection_model(target)
        document = store.prepare(key, text, document_id, metadata)
        return store.write(target, key, [document], must_exist=True, progress=chunk_progress(len(text)))[0]

    added = await run_work(f"vector_update_document {document_id!r}", update)
    return compact(added, include_chunk_ids)  # type: ignore[return-value]


@pack.tool(destructive=True, idempotent=False)
async def vector_delete_document(vectors: Vectors, collection: str, document_id: str) -> DeletedDocument:
    """Delete a document and all its chunks."""
    return await _run(vectors.store.delete_document, collection, document_id)


@pack.tool(read_only=True)
async def vector_list_documents(
    vectors: Vectors, collection: str, filter: dict[str, Any] | None = None, limit: int = 50, cursor: str | None = None,
) -> DocumentList:
    """The documents of a collection in id order, `limit` at a time (1-1000): id, title (first heading
    or line), chunk count, metadata, timestamps. `filter` takes the same form as vector_search's, on
    document fields (your metadata, document_id, created_at, updated_at). Pass the reply's next_cursor
    as `cursor` for the next page; it is null on the last one."""
    from agentloom.packs.vectors.browse import list_documents

    return await _run(list_documents, vectors.store, collection, filter, limit, cursor)


@pack.tool(read_only=True)
async def vector_get_document(
    vectors: Vectors, collection: str, document_id: str, offset: int = 0, max_characters: int = 100_000,
) -> DocumentText:
    """A document's text, put back together from its chunks, with its metadata. Long texts come in
    windows: `max_characters` from `offset`; next_offset continues (null at the end)."""
    from agentloom.packs.vectors.browse import get_document

    return await _run(get_document, vectors.store, collection, document_id, offset, max_characters)


@pack.tool(read_only=True)
async def vector_document_info(vectors: Vectors, collection: str, document_id: str) -> DocumentInfo:
    """A document's metadata, embedding model, timestamps and chunk statistics."""
    from agentloom.packs.vectors.browse import document_info

    return await _run(document_info, vectors.store, collection, document_id)
