"""The shared embedding service: model configuration in SQLite, local ONNX or remote API providers.

Importing this package is cheap (no numpy, onnxruntime, httpx or torch at import time).
"""

from agentloom.embeddings.registry import ModelRecord, ModelRegistry, ProviderRecord
from agentloom.embeddings.service import EmbeddingService

__all__ = ["EmbeddingService", "ModelRecord", "ModelRegistry", "ProviderRecord"]
