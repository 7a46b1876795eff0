"""What the vectors tools answer: the store, the searcher and the browser build these, the tools return them."""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict  # pydantic needs typing_extensions' TypedDict before Python 3.12


class CollectionInfo(TypedDict):
    name: str
    chunk_count: int
    document_count: int
    embedding_model: str | None
    embedding_dimensions: int | None
    created_at: str | None
    metadata: dict[str, Any]


class Deleted(TypedDict):
    name: str
    deleted: bool


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
