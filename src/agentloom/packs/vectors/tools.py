"""The MCP tools of the vectors pack."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, ParamSpec, TypeVar

from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict, WithJsonSchema, with_config
from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError
from agentloom.core.health import Check
from agentloom.core.work import Cancelled, Work, count, current
from agentloom.packs.vectors.replies import (
    CollectionInfo,
    Deleted,
    DeletedDocument,
    DocumentInfo,
    DocumentList,
    DocumentText,
    SearchResult,
)
from agentloom.server.packs import Pack, PackContext, reply_of
from agentloom.server.roots import client_roots
from agentloom.server.work import run_work

if TYPE_CHECKING:
    from agentloom.packs.vectors.search import Searcher
    from agentloom.packs.vectors.settings import VectorSettings
    from agentloom.packs.vectors.store import VectorStore

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

pack: Pack[Vectors] = Pack(
    "vectors",
    "ChromaDB collections, chunked documents, semantic and hybrid search with filters",
    requires=["chromadb", "bm25s", "Stemmer"],
    install="'agentloom[vectors]'",
)


def _listed_once(tool: str) -> WithJsonSchema:
    """A list checked as its items' TypedDict, whose schema tools/list shows once, in ``tool``'s output schema."""
    return WithJsonSchema({"type": "array", "items": {"type": "object"}, "description": f"each as {tool} returns"})


class CollectionList(TypedDict):
    collections: Annotated[list[CollectionInfo], _listed_once("vector_create_collection")]


class AddedDocument(TypedDict):
    document_id: str
    chunk_count: int
    replaced: bool
    embedding_model: str
    chunk_ids: NotRequired[list[str]]
    warning: NotRequired[str]  # chunk_size beyond what the model reads: capped


@with_config(ConfigDict(json_schema_extra=reply_of("vector_add_document")))
class ReplacedDocument(AddedDocument):
    pass


class AddedDocuments(TypedDict):
    added: int
    replaced: int
    total_chunks: int
    documents: Annotated[list[AddedDocument], _listed_once("vector_add_document")]
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
    # One document of vector_add_documents (no docstring: it would be listed as the schema's description).
    model_config = ConfigDict(extra="forbid")
    text: str
    document_id: str | None = None
    metadata: dict[str, str | int | float | bool] | None = None


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
    """The pack's settings, an embedded ChromaDB in the pack's folder unless configured otherwise, the
    shared breakers and embedding service."""
    from agentloom.packs.vectors.settings import VectorSettings
    from agentloom.packs.vectors.store import VectorStore
    from agentloom.retrieval.connection import ChromaConnection

    config = ctx.config(VectorSettings)
    if config.mode == "embedded" and config.path is None:
        config = config.model_copy(update={"path": ctx.data_dir / "chroma"})
    connection = ChromaConnection(config, ctx.breakers, fix="AGENTLOOM_VECTORS__HOST / AGENTLOOM_VECTORS__PORT")
    vectors = Vectors(VectorStore(config, connection, ctx.embeddings))
    ctx.log.info("vectors: %s, chunks of %d tokens", config.describe(), config.chunk_size)
    return vectors


@pack.health
def health(vectors: Vectors) -> list[Check]:
    store = vectors.store
    try:
        names = store.list_collections()
    except Exception as exc:
        return [Check(f"vector store ({store.connection.where})", False, str(exc))]
    return [Check(f"vector store ({store.connection.where})", True, f"{len(names)} collections")]


async def _run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
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
        work.step(
            characters,
            total,
            f"embedded {count(chunks)} of about {count(estimate)} chunks "
            f"({characters / 1e6:,.1f} of {total / 1e6:,.1f} M characters, {rate:,.0f} chunks/s)",
        )

    return report


@pack.tool(idempotent=False)
async def vector_create_collection(
    vectors: Vectors, name: str, metadata: dict[str, str | int | float | bool] | None = None
) -> CollectionInfo:
    """Create a collection (name: 3-63 letters, digits, '.', '_', '-') on the embedding model it keeps."""
    return await _run(vectors.store.create_collection, name, metadata)


@pack.tool(read_only=True)
async def vector_list_collections(vectors: Vectors) -> CollectionList:
    """The collections, with counts, metadata and embedding model."""
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
    """Chunk (sizes in model tokens), embed and store a text; an existing document_id is replaced."""
    from agentloom.packs.vectors.ingest import compact

    store = vectors.store
    check_size(store.settings, [text], "text")

    def add() -> dict[str, Any]:
        current().note(f"splitting {len(text) / 1e6:,.1f} M characters into chunks")
        return store.add_document(
            collection, text, document_id, metadata, chunk_size, chunk_overlap, progress=chunk_progress(len(text))
        )

    added = await run_work(f"vector_add_document into {collection!r}", add)
    return compact(added, include_chunk_ids)  # type: ignore[return-value]  # compact keeps the keys of the reply type


@pack.tool()
async def vector_add_documents(
    vectors: Vectors,
    ctx: Context,
    collection: str,
    documents: list[NewDocumentInput],
    include_chunk_ids: bool = False,
) -> AddedDocuments:
    """vector_add_document for up to 1,000 documents, embedded together; all checked before any is written."""
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

            def report(chunks: int, characters: int, window: list[Any] = window, size: int = size) -> None:
                # progress in documents (a window's share as it goes)
                work.step(
                    len(written) + len(window) * min(characters / size, 0.99),
                    len(items),
                    f"{count(len(written))} of {count(len(items))} documents stored; "
                    f"embedding the next {count(len(window))} ({count(chunks)} chunks so far)",
                )

            for result in store.write(target, key, window, progress=report):
                written.append(compact(result, include_chunk_ids))  # type: ignore[arg-type]  # compact keeps the keys of AddedDocument
            work.step(len(written), len(items), f"{count(len(written))} of {count(len(items))} documents stored")
        return written

    written = await run_work(f"vector_add_documents into {collection!r}", add)
    replaced = sum(d["replaced"] for d in written)
    warnings = {d.pop("warning") for d in written if "warning" in d}
    reply: AddedDocuments = {
        "added": len(written) - replaced,
        "replaced": replaced,
        "total_chunks": sum(d["chunk_count"] for d in written),
        "documents": written,
    }
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
    """Add files, or folders' files matching `patterns` (default *.md, *.markdown, *.txt, *.rst), in
    the client's roots or file_roots; document id: the path from its root."""
    from agentloom.packs.vectors.files import allowed_roots, expand
    from agentloom.packs.vectors.ingest import file_windows

    store = vectors.store
    roots = allowed_roots(await client_roots(ctx), store.settings.file_roots, Path.cwd())
    added: list[AddedFile] = []
    skipped: list[SkippedFile] = []
    warning: str | None = None
    key = ""

    def add() -> None:
        nonlocal key
        work = current()
        target = store.collection(collection)  # an unknown or invalid collection is refused, not "skipped"
        key = store.collection_model(target)
        work.note("listing files")
        files = list(expand(paths, patterns, roots))
        try:
            add_windows(work, target, files)
        except Cancelled:
            message = (
                f"vector_add_files cancelled: {count(len(added))} of {count(len(files))} files were added "
                "and are kept; add the folder again to add the rest (files already added are replaced)."
            )
            log.info("%s", message)
            raise Cancelled(message) from None

    def add_windows(work: Work, target: Any, files: list[Any]) -> None:
        nonlocal warning
        for window in file_windows(store, target, key, files, metadata):
            skipped.extend({"path": s.path, "reason": s.reason} for s in window.skipped)
            seen = len(added) + len(skipped)

            def report(chunks: int, _characters: int, seen: int = seen, window: Any = window) -> None:
                work.step(
                    seen,
                    len(files),
                    f"{count(seen)} of {count(len(files))} files done; "
                    f"embedding the next {count(len(window.documents))} ({count(chunks)} chunks so far)",
                )

            for result in store.write(target, key, window.documents, progress=report):
                doc_id = result["document_id"]
                added.append(
                    {
                        "document_id": doc_id,
                        "path": window.paths[doc_id],
                        "chunk_count": result["chunk_count"],
                        "replaced": result["replaced"],
                    }
                )
                warning = result.get("warning", warning)
            done = len(added) + len(skipped)
            work.step(done, len(files), f"{count(done)} of {count(len(files))} files done")

    await run_work(f"vector_add_files into {collection!r}", add)
    replaced = sum(d["replaced"] for d in added)
    reply: AddedFiles = {
        "added": len(added) - replaced,
        "replaced": replaced,
        "total_chunks": sum(d["chunk_count"] for d in added),
        "embedding_model": key,
        "documents": added,
        "skipped": skipped,
    }
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
    """Chunks closest to `query`, best first, score 0-1. filter: {field: value|{$ne|$gt|$gte|$lt|$lte|
    $in|$contains: v}}, {$and|$or: [...]}; dates ISO. document_contains: a substring. hybrid: + BM25."""
    return await _run(
        vectors.searcher.search, collection, query, n, filter, document_contains, hybrid, one_per_document, min_score
    )


@pack.tool(idempotent=True)
async def vector_update_document(
    vectors: Vectors,
    collection: str,
    document_id: str,
    text: str,
    metadata: dict[str, str | int | float | bool] | None = None,
    include_chunk_ids: bool = False,
) -> ReplacedDocument:
    """Replace a document's text and metadata at once (searches never see a mix)."""
    from agentloom.packs.vectors.ingest import compact

    store = vectors.store
    check_size(store.settings, [text], "text")

    def update() -> dict[str, Any]:
        return store.add_document(
            collection, text, document_id, metadata, must_exist=True, progress=chunk_progress(len(text))
        )

    added = await run_work(f"vector_update_document {document_id!r}", update)
    return compact(added, include_chunk_ids)  # type: ignore[return-value]  # compact keeps the keys of the reply type


@pack.tool(destructive=True, idempotent=False)
async def vector_delete_document(vectors: Vectors, collection: str, document_id: str) -> DeletedDocument:
    """Delete a document and all its chunks."""
    return await _run(vectors.store.delete_document, collection, document_id)


@pack.tool(read_only=True)
async def vector_list_documents(
    vectors: Vectors,
    collection: str,
    filter: dict[str, Any] | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> DocumentList:
    """A collection's documents in id order, `limit` (1-1000) a page; `filter` as vector_search's;
    `cursor`: the previous page's next_cursor."""
    from agentloom.packs.vectors.browse import list_documents

    return await _run(list_documents, vectors.store, collection, filter, limit, cursor)


@pack.tool(read_only=True)
async def vector_get_document(
    vectors: Vectors,
    collection: str,
    document_id: str,
    offset: int = 0,
    max_characters: int = 100_000,
) -> DocumentText:
    """A document's text from its chunks: `max_characters` from `offset`; next_offset continues."""
    from agentloom.packs.vectors.browse import get_document

    return await _run(get_document, vectors.store, collection, document_id, offset, max_characters)


@pack.tool(read_only=True)
async def vector_document_info(vectors: Vectors, collection: str, document_id: str) -> DocumentInfo:
    """A document's metadata, embedding model, timestamps and chunk statistics."""
    from agentloom.packs.vectors.browse import document_info

    return await _run(document_info, vectors.store, collection, document_id)
