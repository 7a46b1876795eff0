"""The shared embedding service: model configuration in SQLite, local ONNX or remote API providers.

Importing this package is cheap (no numpy, onnxruntime, httpx or torch at import time).
"""

from agentloom.embeddings.records import ModelRecord, ProviderRecord
from agentloom.embeddings.registry import ModelRegistry
from agentloom.embeddings.service import EmbeddingService

__all__ = ["EmbeddingService", "ModelRecord", "ModelRegistry", "ProviderRecord"]
