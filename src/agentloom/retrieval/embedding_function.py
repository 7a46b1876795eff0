"""Our embedding service as a Chroma embedding function.

Chroma's default function downloads a model at first use, which fails offline; every
collection of the packs is created with this one, and vectors are passed explicitly.

Chroma 1.x stores the function's ``name()`` and ``get_config()`` in each collection's
configuration and schema, and rebuilds it by name from ``known_embedding_functions``
whenever it reads them (opening a collection, every add, a query by text). An unknown name
gave "Could not reconstruct embedding function agentloom" on every start, so the class is
registered with ``register_embedding_function``: importing this module is enough.

A function that Chroma rebuilds from the stored config has no service (the config holds
only the model key) and refuses to embed. It never falls back to Chroma's default function
and never loads or downloads a model: callers pass vectors, or open the collection with
``ServiceEmbeddingFunction(service, model_key)``.
"""

from __future__ import annotations

from typing import Any, cast

from chromadb.api.types import Documents, Embeddable, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from agentloom.embeddings import EmbeddingService

NAME = "agentloom"


@register_embedding_function
class ServiceEmbeddingFunction(EmbeddingFunction[Documents]):
    def __init__(self, service: EmbeddingService | None = None, model_key: str | None = None) -> None:
        self.service = service
        self.model_key = model_key

    def __call__(self, input: Documents) -> Embeddings:
        if self.service is None:
            raise RuntimeError(
                "the agentloom embedding function was rebuilt from a collection's stored configuration, "
                "which holds no embedding service; pass embeddings explicitly or open the collection with "
                "ServiceEmbeddingFunction(service, model_key)"
            )
        return list(self.service.embed_documents(list(input), self.model_key))

    @staticmethod
    def name() -> str:
        return NAME

    def default_space(self) -> Space:
        return "cosine"

    def get_config(self) -> dict[str, Any]:
        return {"model_key": self.model_key}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> ServiceEmbeddingFunction:
        return ServiceEmbeddingFunction(None, config.get("model_key"))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        model_key = config.get("model_key")
        if model_key is not None and not isinstance(model_key, str):
            raise ValueError(f"agentloom embedding function: model_key must be a string or null, got {model_key!r}")


def for_collection(service: EmbeddingService, model_key: str | None) -> EmbeddingFunction[Embeddable]:
    """The function to open or create a collection with. Chroma's collection methods are annotated for a
    function of documents *and* images (its own default value needs a type: ignore there); ours embeds
    documents, all a text collection ever gives it, so it is passed as that type."""
    return cast("EmbeddingFunction[Embeddable]", ServiceEmbeddingFunction(service, model_key))
