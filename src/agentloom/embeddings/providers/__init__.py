"""Embedding providers: where vectors come from (local ONNX model, OpenAI-compatible API, Ollama).

Concrete modules are imported inside :func:`make_provider` so that importing this package
costs nothing and a server that only uses an API model never loads onnxruntime.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from agentloom.core.errors import ConfigError
from agentloom.embeddings.providers.normalise import l2_normalise

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings.records import ModelRecord, ProviderRecord


@runtime_checkable
class Provider(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape (n, dimensions)."""

    dimensions: int

    @property
    def tokenizer(self) -> Tokenizer | None:
        """The model's own tokenizer (for chunkers counting tokens), or None for remote models."""

    @property
    def max_tokens(self) -> int | None:
        """Input limit in the tokenizer's tokens, special tokens included; None when unknown."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def prepare(self, progress: Callable[[str], None] | None = None) -> None:
        """Make the provider ready (load or export a model). Remote providers do nothing."""

    def close(self) -> None: ...


def make_provider(
    record: ModelRecord,
    provider_record: ProviderRecord,
    settings: Settings,
    breakers: BreakerRegistry,
) -> Provider:
    """Build (cheaply: nothing is loaded yet) the provider for a model record."""
    kind = provider_record.kind
    if kind == "local":
        from agentloom.embeddings.providers.packaged import PackagedProvider, is_packaged

        if is_packaged(record):  # config.model_path "pkg:<name>": weights inside a Python package
            return PackagedProvider(record, settings)
        from agentloom.embeddings.providers.local import LocalProvider

        return LocalProvider(record, settings)
    if kind == "openai":
        from agentloom.embeddings.providers.openai import OpenAIProvider

        return OpenAIProvider(record, provider_record, breakers)
    if kind == "ollama":
        from agentloom.embeddings.providers.ollama import OllamaProvider

        return OllamaProvider(record, provider_record, breakers)
    raise ConfigError(
        f"provider {provider_record.name!r} has kind {kind!r}: supported kinds are local, openai, ollama."
    )


__all__ = ["Provider", "l2_normalise", "make_provider"]
