"""Reading what a collection holds: its documents page by page, one document whole, its statistics.

The manifest (see store.py) lists the documents; their text lives only in the chunks. A
document's text is put back together from its current chunks by their character offsets:
consecutive chunks overlap (``chunk_overlap`` > 0, the default), so the text comes back
exactly; with no overlap, the whitespace where a chunk was cut is not stored and is
restored as a paragraph break (two or more characters) or one space.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError, NotFoundError
from agentloom.core.timestamps import iso
from agentloom.packs.vectors.filters import parse_filter
from agentloom.packs.vectors.records import DocumentRecord
from agentloom.packs.vectors.replies import DocumentInfo, DocumentList, DocumentText, ListedDocument
from agentloom.packs.vectors.store import VectorStore
from agentloom.retrieval.columns import column, meta_str

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

MAX_LIST = 1000
TITLE_CHARACTERS = 120
MAX_TEXT = 1_000_000


def list_documents(
    store: VectorStore,
    collection_name: str,
    filter: Mapping[str, Any] | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> DocumentList:
    """A page of documents in id order; ``next_cursor`` continues it (None on the last page)."""
    if not 1 <= limit <= MAX_LIST:
        raise AgentloomError(f"limit must be between 1 and {MAX_LIST}, got {limit}.")
    after = _decode(cursor)
    collection = store.collection(collection_name)
    records = store.documents(collection_name)
    if filter:
        # Document-level fields (your metadata, document_id, created_at, updated_at) are the
        # same on every chunk of a document, so matching first chunks matches documents.
        plan = parse_filter(filter, None)
        first = {"chunk_index": 0}
        where: dict[str, Any] = first if plan.where is None else {"$and": [plan.where, first]}
        got = store.connection.call(lambda: collection.get(where=where, include=["metadatas"]))
        matching = {
            meta_str(m, "document_id")
            for m in column(got["metadatas"], "metadatas")
            if _current(m, records) and plan.matches(m)
        }
        records = {d: r for d, r in records.items() if d in matching}
    ordered = sorted(d for d in records if after is None or d > after)
    page = ordered[:limit]
    firsts = _first_chunks(store, collection, [records[d] for d in page])
    documents: list[ListedDocument] = [
        {
            "document_id": d,
            "title": _title(firsts.get(d, "")),
            "chunk_count": records[d].chunk_count,
            "metadata": records[d].metadata,
            "created_at": iso(records[d].created_at),
            "updated_at": iso(records[d].updated_at),
        }
        for d in page
    ]
    more = len(ordered) > limit
    return {
        "collection": collection_name,
        "documents": documents,
        "total": len(records),
        "next_cursor": _encode(page[-1]) if more else None,
    }


def get_document(
    store: VectorStore, collection_name: str, document_id: str, offset: int = 0, max_characters: int = 100_000
) -> DocumentText:
    """The document's text from its chunks, a window of it when long (``offset``, ``max_characters``)."""
    if offset < 0:
        raise AgentloomError(f"offset must be 0 or more, got {offset}.")
    if not 1 <= max_characters <= MAX_TEXT:
        raise AgentloomError(f"max_characters must be between 1 and {MAX_TEXT:,}, got {max_characters}.")
    collection = store.collection(collection_name)
    record, chunks = _current_chunks(store, collection, document_id)
    text = reassemble([(m["start"], m["end"], t) for t, m in chunks])
    window = text[offset : offset + max_characters]
    end = offset + len(window)
    return {
        "document_id": document_id,
        "collection": collection_name,
        "text": window,
        "offset": offset,
        "total_characters": len(text),
        "next_offset": end if end < len(text) else None,
        "metadata": record.metadata,
        "embedding_model": record.embedding_model,
        "chunk_count": len(chunks),
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
    }


def document_info(store: VectorStore, collection_name: str, document_id: str) -> DocumentInfo:
    """A document's metadata, model, timestamps and chunk statistics (no text)."""
    collection = store.collection(collection_name)
    record, chunks = _current_chunks(store, collection, document_id, with_ids=True)
    tokens = [int(m["tokens"]) for _, m in chunks]
    chars = [len(t) for t, _ in chunks]
    return {
        "document_id": document_id,
        "collection": collection_name,
        "metadata": record.metadata,
        "embedding_model": record.embedding_model,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "chunk_count": len(chunks),
        "chunk_ids": [m["id"] for _, m in chunks],
        "total_characters": max((m["end"] for _, m in chunks), default=0),
        "chunk_tokens": {
            "min": min(tokens, default=0),
            "max": max(tokens, default=0),
            "mean": round(sum(tokens) / len(tokens), 1) if tokens else 0,
        },
        "chunk_characters": {"min": min(chars, default=0), "max": max(chars, default=0)},
    }


def reassemble(chunks: list[tuple[int, int, str]]) -> str:
    """The text covered by chunks given as (start, end, text) in the original's character offsets."""
    parts: list[str] = []
    covered = None  # end offset of the text so far
    for start, end, text in sorted(chunks, key=lambda c: c[0]):
        if covered is None or start >= covered:
            if covered is not None and start > covered:
                parts.append("\n\n" if start - covered >= 2 else " ")
            parts.append(text)
        elif end > covered:
            parts.append(text[covered - start :])
        covered = end if covered is None else max(covered, end)
    return "".join(parts)


def _current_chunks(
    store: VectorStore, collection: Collection, document_id: str, *, with_ids: bool = False
) -> tuple[DocumentRecord, list[tuple[str, dict[str, Any]]]]:
    record = store.document(collection.name, document_id)
    if record is None:
        raise NotFoundError(
            f"document {document_id!r} not found in collection {collection.name!r}; "
            "vector_list_documents lists the documents."
        )
    got = store.connection.call(
        lambda: collection.get(
            where={"$and": [{"document_id": document_id}, {"generation": record.generation}]},
            include=["metadatas", "documents"],
        )
    )
    chunks: list[tuple[str, dict[str, Any]]] = [
        (chunk, {**meta, "id": i} if with_ids else dict(meta))
        for i, chunk, meta in zip(
            got["ids"], column(got["documents"], "documents"), column(got["metadatas"], "metadatas")
        )
    ]
    chunks.sort(key=lambda c: c[1]["chunk_index"])
    return record, chunks


def _first_chunks(store: VectorStore, collection: Collection, records: list[DocumentRecord]) -> dict[str, str]:
    if not records:
        return {}
    current = {r.document_id: r for r in records}
    where: dict[str, Any] = {"$and": [{"chunk_index": 0}, {"document_id": {"$in": list(current)}}]}
    got = store.connection.call(lambda: collection.get(where=where, include=["documents", "metadatas"]))
    documents, metadatas = column(got["documents"], "documents"), column(got["metadatas"], "metadatas")
    return {meta_str(m, "document_id"): chunk for chunk, m in zip(documents, metadatas) if _current(m, current)}


def _current(meta: Mapping[str, Any], records: Mapping[str, DocumentRecord]) -> bool:
    record = records.get(str(meta.get("document_id")))
    return record is not None and record.generation == meta.get("generation")


def _title(text: str) -> str:
    """The first non-empty line, without Markdown heading marks, cut at TITLE_CHARACTERS."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.lstrip("#").strip() or line
    return line if len(line) <= TITLE_CHARACTERS else line[: TITLE_CHARACTERS - 1].rstrip() + "…"


def _encode(document_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(["after", document_id]).encode()).decode()


def _decode(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        kind, after = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if kind == "after" and isinstance(after, str):
            return after
    except (ValueError, binascii.Error, TypeError, UnicodeDecodeError):
        pass
    raise AgentloomError("cursor is not one this tool returned: pass next_cursor from the previous reply, or omit it.")
