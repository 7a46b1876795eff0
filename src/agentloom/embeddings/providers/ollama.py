"""Ollama's embedding endpoint: ``POST {base_url}/api/embed`` (offline, on the user's machine).

Request ``{"model": key, "input": [...], "truncate": true}``; response
``{"embeddings": [[...], ...]}`` in input order. Same breaker rules as the OpenAI adapter.
No key is needed; one is sent as a Bearer token when configured (for proxies in front of Ollama).
"""

from __future__ import annotations

from typing import Any

from agentloom.core.errors import AgentloomError
from agentloom.embeddings.providers.openai import HTTPEmbeddingProvider
from agentloom.embeddings.records import DEFAULT_OLLAMA_URL


class OllamaProvider(HTTPEmbeddingProvider):
    needs_key = False

    @property
    def url(self) -> str:
        base = (self.provider_record.base_url or DEFAULT_OLLAMA_URL).rstrip("/")
        return base + "/api/embed"

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.record.key, "input": texts, "truncate": True}

    def _vectors(self, body: Any, count: int) -> list[Any]:
        vectors = body["embeddings"]
        if not isinstance(vectors, list) or not all(isinstance(v, list) for v in vectors):
            raise ValueError("'embeddings' is not a list of vectors")
        return vectors

    def _client_error(self, status: int, detail: str) -> AgentloomError:
        if status == 404 or "not found" in detail.lower():
            return AgentloomError(
                f"Ollama at {self.url} does not have model {self.record.key!r} ({detail}): "
                f"run `ollama pull {self.record.key}` on that machine, or fix the model key."
            )
        return super()._client_error(status, detail)
