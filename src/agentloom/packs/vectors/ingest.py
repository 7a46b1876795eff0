"""Adding many documents at once: files from folders, or a list of texts.

Work goes in windows of about ``WINDOW_CHARACTERS`` of text: the documents of a window are
read and checked, then written together (store.write embeds their chunks in full batches: one
small file at a time left the model mostly idle) and committed all or nothing.

**Which document a file is.** A file's id is its path relative to the outermost allowed
folder holding it (files.Roots.file_id), and the file's resolved path is recorded as
``source_path``. A file already in the collection keeps the id it was stored under (found
by its ``source_path``), so adding ``corpus/fastapi`` and later ``corpus/`` replaces those
documents instead of adding them twice. An id that holds another file, or a document not
added from a file, is never overwritten: that file is skipped and the reply says why.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError
from agentloom.packs.vectors.files import LINK_OUT, Found, read_text
from agentloom.packs.vectors.records import NewDocument
from agentloom.packs.vectors.store import VectorStore
from agentloom.retrieval.columns import column, meta_str

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

WINDOW_CHARACTERS = 262_144
MAX_DOCUMENTS = 1000  # per vector_add_documents call


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass
class FileWindow:
    """Files read and chunked, waiting to be embedded and written together."""

    documents: list[NewDocument]
    paths: dict[str, str]  # document id -> the path as found
    skipped: list[Skipped]


def file_windows(
    store: VectorStore,
    collection: Collection,
    model_key: str,
    files: list[Found],
    metadata: Mapping[str, Any] | None,
) -> Iterator[FileWindow]:
    """Read, identify and chunk files, a window at a time."""
    claimed: dict[str, str] = {}  # document id -> source path, in this call
    window = FileWindow([], {}, [])
    size = 0
    for start in range(0, len(files), 64):
        group = files[start : start + 64]
        targets = [str(f.target) for f in group if f.target is not None]
        by_path = stored_by_path(store, collection, targets)
        records = store.documents(collection.name, [f.document_id for f in group])
        for found in group:
            try:
                document = _prepare_file(store, model_key, found, metadata, by_path, records, claimed)
            except AgentloomError as exc:
                window.skipped.append(Skipped(str(found.path), str(exc)))
                continue
            except OSError as exc:
                window.skipped.append(Skipped(str(found.path), exc.strerror or str(exc)))
                continue
            window.documents.append(document)
            window.paths[document.document_id] = str(found.path)
            size += len(document.text)
            if size >= WINDOW_CHARACTERS:
                yield window
                window, size = FileWindow([], {}, []), 0
    if window.documents or window.skipped:
        yield window


def _prepare_file(
    store: VectorStore,
    model_key: str,
    found: Found,
    metadata: Mapping[str, Any] | None,
    by_path: Mapping[str, str],
    records: Mapping[str, Any],
    claimed: dict[str, str],
) -> NewDocument:
    if found.target is None:
        raise AgentloomError(LINK_OUT)
    source = str(found.target)
    doc_id = by_path.get(source)
    if doc_id is None:  # new to the collection: its path id, unless that id holds something else
        doc_id = found.document_id
        record = records.get(doc_id)
        holder = claimed.get(doc_id) or (record.metadata.get("source_path", "") if record is not None else None)
        if holder is not None and holder != source:
            what = f"file {holder}" if holder else "a document added with vector_add_document"
            raise AgentloomError(
                f"document id {doc_id!r} already holds {what}; not replaced. Delete that document "
                "(vector_delete_document) to store this file under that id."
            )
    if claimed.get(doc_id, source) != source:
        raise AgentloomError(f"document id {doc_id!r} already holds file {claimed[doc_id]} in this call; not replaced.")
    text = read_text(found.target)
    if not text.strip():
        raise AgentloomError("empty file")
    meta = {**(metadata or {}), "source_path": source, "file_name": found.path.name}
    document = store.prepare(model_key, text, doc_id, meta)
    claimed[doc_id] = source
    return document


def stored_by_path(store: VectorStore, collection: Collection, paths: list[str]) -> dict[str, str]:
    """For files already in the collection: source path -> the id of its current document."""
    if not paths:
        return {}
    where: dict[str, Any] = {"$and": [{"chunk_index": 0}, {"source_path": {"$in": paths}}]}
    got = store.connection.call(lambda: collection.get(where=where, include=["metadatas"]))
    found = {meta_str(m, "source_path"): m for m in column(got["metadatas"], "metadatas")}
    current = store.current_generations(collection.name, {meta_str(m, "document_id") for m in found.values()})
    return {
        p: meta_str(m, "document_id")
        for p, m in found.items()
        if current.get(meta_str(m, "document_id")) == m["generation"]
    }


def text_windows(
    store: VectorStore,
    model_key: str,
    items: Sequence[Mapping[str, Any]],
) -> list[list[NewDocument]]:
    """Check and chunk every document of a bulk add before anything is written; then windows."""
    if not items:
        raise AgentloomError('documents is empty: pass one or more {"text": ...} objects.')
    if len(items) > MAX_DOCUMENTS:
        raise AgentloomError(f"documents holds {len(items)} items; at most {MAX_DOCUMENTS} per call: split the list.")
    prepared: list[NewDocument] = []
    ids: dict[str, int] = {}
    for i, item in enumerate(items):
        try:
            document = store.prepare(model_key, item.get("text"), item.get("document_id"), item.get("metadata"))
        except AgentloomError as exc:
            raise AgentloomError(f"documents[{i}]: {exc} Nothing was added.") from None
        if document.document_id in ids:
            raise AgentloomError(
                f"documents[{i}].document_id {document.document_id!r} repeats documents[{ids[document.document_id]}]; "
                "ids must be unique in one call. Nothing was added."
            )
        ids[document.document_id] = i
        prepared.append(document)
    windows: list[list[NewDocument]] = [[]]
    size = 0
    for document in prepared:
        if size >= WINDOW_CHARACTERS:
            windows.append([])
            size = 0
        windows[-1].append(document)
        size += len(document.text)
    return windows


def compact(result: Mapping[str, Any], chunk_ids: bool) -> dict[str, Any]:
    """What a reply shows of one written document: counts, and the chunk ids only on request."""
    shown = {
        k: result[k] for k in ("document_id", "chunk_count", "replaced", "embedding_model", "warning") if k in result
    }
    if chunk_ids:
        shown["chunk_ids"] = result["chunk_ids"]
    return shown
