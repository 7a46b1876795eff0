"""The MCP tools of the vectors pack."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context
from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError
from agentloom.core.health import Check
from agentloom.server.packs import Pack, PackContext
from agentloom.server.roots import client_roots

if TYPE_CHECKING:
    from agentloom.packs.vectors.search import Searcher
    from agentloom.packs.vectors.store import VectorStore

log = logging.getLogger(__name__)

pack = Pack("vectors", "ChromaDB collections, chunked documents, semantic and hybrid search with filters")


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
    chunk_ids: list[str]
    replaced: bool
    embedding_model: str
    warnings: list[str]


class SkippedFile(TypedDict):
    path: str
    reason: str


class AddedFiles(TypedDict):
    documents: list[AddedDocument]
    skipped: list[SkippedFile]
    total_chunks: int


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
    return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))


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
) -> AddedDocument:
    """Add a text document: it is split into chunks (sizes in the embedding model's tokens, preferring
    paragraph and sentence boundaries), embedded and stored. Without document_id one is generated.
    Adding an existing document_id replaces that document as one unit (never duplicate chunks).
    Metadata values must be strings, numbers or booleans."""
    return await _run(vectors.store.add_document, collection, text, document_id, metadata, chunk_size, chunk_overlap)


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
    up in them. A file's document id is its name, or its path relative to the folder given; re-adding
    replaces it. Unreadable or binary files are skipped with the reason; progress is reported per file."""
    from agentloom.packs.vectors.files import LINK_OUT, allowed_roots, expand, read_text

    store = vectors.store
    await _run(store.collection, collection)  # an unknown or invalid collection is refused, not "skipped"
    roots = allowed_roots(await client_roots(ctx), store.settings.file_roots, Path.cwd())
    files = await _run(lambda: list(expand(paths, patterns, roots)))
    added: list[AddedDocument] = []
    skipped: list[SkippedFile] = []
    for done, found in enumerate(files, start=1):
        try:
            if found.target is None:
                raise AgentloomError(LINK_OUT)
            text = await _run(read_text, found.target)
            if not text.strip():
                raise AgentloomError("empty file")
            meta = {**(metadata or {}), "source_path": str(found.target), "file_name": found.path.name}
            added.append(await _run(store.add_document, collection, text, found.document_id, meta))
        except AgentloomError as exc:
            skipped.append({"path": str(found.path), "reason": str(exc)})
        except OSError as exc:
            skipped.append({"path": str(found.path), "reason": exc.strerror or str(exc)})
        await ctx.report_progress(done, len(files), found.document_id)
    return {"documents": added, "skipped": skipped, "total_chunks": sum(d["chunk_count"] for d in added)}


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
) -> SearchResult:
    """Semantic search: the chunks closest to `query`, best first, each with a relevance score in [0, 1]
    (cosine similarity). `filter` restricts chunks before the search, in the form Chroma users know:
    {"field": value}, {"field": {"$ne"|"$gt"|"$gte"|"$lt"|"$lte": v}}, {"field": {"$in": [..]}},
    {"field": {"$contains": "substring"}}; several keys or {"$and": [...]} combine with AND, {"$or": [...]} with OR; created_at and
    updated_at accept ISO dates. `document_contains` keeps chunks whose text contains a substring.
    `hybrid` fuses keyword (BM25) and vector rankings; `one_per_document` keeps each document's best chunk."""
    return await _run(vectors.searcher.search, collection, query, n, filter, document_contains, hybrid, one_per_document)


@pack.tool(idempotent=True)
async def vector_update_document(
    vectors: Vectors,
    collection: str,
    document_id: str,
    text: str,
    metadata: dict[str, str | int | float | bool] | None = None,
) -> AddedDocument:
    """Replace an existing document's text and metadata. Its chunks are swapped as one unit: searches see
    either the old or the new version, never a mix, and a failure keeps the old version whole."""
    return await _run(vectors.store.add_document, collection, text, document_id, metadata, must_exist=True)


@pack.tool(destructive=True, idempotent=False)
async def vector_delete_document(vectors: Vectors, collection: str, document_id: str) -> DeletedDocument:
    """Delete a document and all its chunks."""
    return await _run(vectors.store.delete_document, collection, document_id)


@pack.tool(read_only=True)
async def vector_document_info(vectors: Vectors, collection: str, document_id: str) -> DocumentInfo:
    """A document's metadata, embedding model, timestamps and chunk statistics."""
    return await _run(vectors.store.document_info, collection, document_id)
