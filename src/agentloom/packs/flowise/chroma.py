"""The pack's ChromaDB collections, opened one way for the catalog and the learning store alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloom.embeddings import EmbeddingService
    from agentloom.retrieval.connection import ChromaConnection


def open_collection(connection: ChromaConnection, embeddings: EmbeddingService, name: str, model: str) -> Any:
    """A collection of the pack's ChromaDB, created when missing: cosine space, its embedding model and
    dimensions recorded, searched through our embedding service. (Only the catalog ever drops one.)"""
    from agentloom.retrieval.embedding_function import for_collection

    client = connection.client()
    dimensions = embeddings.model(model).dimensions

    return connection.call(
        lambda: client.get_or_create_collection(
            name,
            embedding_function=for_collection(embeddings, model),
            metadata={"embedding_model": model, "embedding_dimensions": dimensions},
            configuration={"hnsw": {"space": "cosine"}},
        )
    )
