"""Our embedding service as a Chroma embedding function.

Chroma's default function downloads a model at first use, which fails offline; every
collection of this pack is created with this one, and vectors are passed explicitly.
"""

from __future__ import annotations

from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from agentloom.embeddings import EmbeddingService


class ServiceEmbeddingFunction(EmbeddingFunction[Documents]):
    def __init__(self, service: EmbeddingService | None = None, model_key: str | None = None) -> None:
        self.service = service
        self.model_key = model_key

    def __call__(self, input: Documents) -> Embeddings:
        if self.service is None:
            raise RuntimeError("agentloom embedding function used without its service")
        return list(self.service.embed_documents(list(input), self.model_key))

    @staticmethod
    def name() -> str:
        return "agentloom"

    def default_space(self) -> str:  # type: ignore[override]
        return "cosine"

    def get_config(self) -> dict[str, Any]:
        return {"model_key": self.model_key}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> ServiceEmbeddingFunction:
        return ServiceEmbeddingFunction(None, config.get("model_key"))
