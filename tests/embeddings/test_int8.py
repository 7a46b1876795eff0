"""The built-in int8 variant of the local model: registered, made offline, close to the exact model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from agentloom.core.breakers import BreakerRegistry
from agentloom.embeddings import EmbeddingService, ModelRegistry, sessions
from agentloom.embeddings.bert.build import packaged_source
from agentloom.embeddings.providers import local
from agentloom.embeddings.quantize import int8_path
from agentloom.embeddings.records import DEFAULT_MODEL_KEY, INT8_MODEL_KEY, ModelRecord

from .conftest import make_settings

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

SENTENCES = [
    "Aspirin lowers the risk of a first heart attack in adults over fifty.",
    "Vitamin D supplements do not prevent fractures in healthy older people.",
    "The retrieval pipeline splits documents into chunks, embeds them and stores vectors.",
    "How do I configure the embedding model in SQLite?",
    "Generate a conventional commit message from the staged changes.",
    "The quick brown fox jumps over the lazy dog.",
    "Ceci n'est pas une pipe.",
    "def embed(texts: list[str]) -> np.ndarray: ...",
    " ".join(f"Sentence {i}: long inputs are truncated at 256 tokens by both models." for i in range(40)),
]
# Measured on these sentences: cosine to the exact model's vectors 0.985-0.995 (SciFact
# abstracts: min 0.989, mean 0.993). Degenerate inputs ("", "?") still give about 0.97.
MIN_COSINE = 0.98
MIN_COSINE_DEGENERATE = 0.95
MIN_BATCH_COSINE = 0.98


def _int8(registry: ModelRegistry) -> ModelRecord:
    record = registry.get(INT8_MODEL_KEY)
    assert record is not None, "the int8 model is registered"
    return record


@pytest.fixture(scope="module")
def int8_cache(onnx_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache dir holding the session's exact ONNX file only (the int8 file is made in it by the tests).

    Its own folder: the shared one must keep exactly the exact file (test_local checks that).
    """
    cache = tmp_path_factory.mktemp("int8-cache")
    target = local.onnx_cache_path(packaged_source(), cache)
    target.parent.mkdir(parents=True)
    try:
        os.link(onnx_file, target)
    except OSError:
        shutil.copy2(onnx_file, target)
    return cache


@pytest.fixture(scope="module")
def int8_service(int8_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> EmbeddingService:
    svc = EmbeddingService(make_settings(tmp_path_factory.mktemp("int8-data"), int8_cache), BreakerRegistry())
    svc.prepare(INT8_MODEL_KEY)
    return svc


def test_int8_key_is_built_in_registered_on_first_use_and_never_the_default(tmp_path: Path) -> None:
    registry = ModelRegistry(tmp_path / "models.db")
    assert registry.list_models() == []
    record = registry.get(INT8_MODEL_KEY)  # naming it registers it
    assert record is not None
    assert (record.key, record.provider, record.kind, record.dimensions) == (INT8_MODEL_KEY, "local", "local", 384)
    assert dict(record.config) == {"quantization": "int8"}
    assert not record.is_default and record.enabled
    assert registry.ensure_default().key == DEFAULT_MODEL_KEY  # the default stays the exact model
    assert _int8(registry).id == record.id  # once only
    assert sorted(m.key for m in registry.list_models()) == [DEFAULT_MODEL_KEY, INT8_MODEL_KEY]
    assert [m.key for m in registry.list_models() if m.is_default] == [DEFAULT_MODEL_KEY]
    assert registry.get(INT8_MODEL_KEY, provider="elsewhere") is None  # only under the local provider
    assert registry.get("all-MiniLM-L6-v2-int4") is None  # not a built-in: nothing is added


def test_service_uses_int8_only_when_asked(int8_service: EmbeddingService) -> None:
    assert int8_service.model().key == DEFAULT_MODEL_KEY
    assert int8_service.model(INT8_MODEL_KEY).key == INT8_MODEL_KEY
    assert int8_service.tokenizer(INT8_MODEL_KEY) is not None and int8_service.max_tokens(INT8_MODEL_KEY) == 256


def test_prepare_makes_the_int8_file_offline_without_torch(int8_cache: Path, tmp_path: Path) -> None:
    """`agentloom models prepare all-MiniLM-L6-v2-int8` with every network connection refused."""
    exact = local.onnx_cache_path(packaged_source(), int8_cache)
    target = int8_path(exact, int8_cache)
    target.unlink(missing_ok=True)  # made here, by the command
    code = textwrap.dedent(
        f"""
        import socket, sys

        def refuse(*args, **kwargs):
            raise OSError("network disabled by the test")

        real_connect = socket.socket.connect
        def connect(self, address):
            if self.family in (socket.AF_INET, socket.AF_INET6):
                refuse()
            return real_connect(self, address)

        socket.socket.connect = connect
        socket.socket.connect_ex = lambda self, address: refuse()
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        sys.argv = ["agentloom", "models", "prepare", {INT8_MODEL_KEY!r}, "--data-dir", {str(tmp_path / "data")!r}]
        from agentloom.cli import main
        try:
            main()
        finally:
            print("HEAVY", [m for m in ("torch", "transformers") if m in sys.modules], flush=True)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(AGENTLOOM_CACHE_DIR=str(int8_cache), HF_HUB_OFFLINE="1", NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert f"ready: {INT8_MODEL_KEY} (384 dimensions)" in proc.stderr
    assert "HEAVY []" in proc.stdout  # quantised with onnxruntime alone: no torch
    assert target.is_file() and target.stat().st_size < exact.stat().st_size / 3  # int8 weights
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([exact.name, target.name])  # no temp files
    registry = ModelRegistry(tmp_path / "data" / "models.db")
    assert not _int8(registry).is_default and registry.ensure_default().key == DEFAULT_MODEL_KEY


def test_int8_vectors_are_normalised_and_close_to_the_exact_model(int8_service: EmbeddingService) -> None:
    ours = int8_service.embed_documents(SENTENCES, INT8_MODEL_KEY)
    exact = int8_service.embed_documents(SENTENCES)
    assert ours.shape == exact.shape == (len(SENTENCES), 384) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(ours * exact, axis=1)
    assert cosines.min() >= MIN_COSINE, dict(zip(SENTENCES, cosines.round(4), strict=True))
    assert cosines.max() < 0.9999  # really a different model, not the exact one under another name
    # Activations are quantised with one scale per batch, so a text alone and the same text in a
    # padded batch differ slightly (measured on the 300 SciFact test queries: cosine min 0.984,
    # mean 0.992); the exact model gives the same vector either way.
    for text, vec in zip(SENTENCES, ours, strict=True):
        assert float(np.dot(int8_service.embed_query(text, INT8_MODEL_KEY), vec)) >= MIN_BATCH_COSINE
    odd = ["", " ", "?", "🙂 ©®™ → ←", "读取Excel文件并提取数据分析"]
    odd_cos = np.sum(int8_service.embed_documents(odd, INT8_MODEL_KEY) * int8_service.embed_documents(odd), axis=1)
    assert odd_cos.min() >= MIN_COSINE_DEGENERATE, dict(zip(odd, odd_cos.round(4), strict=True))


def test_int8_ranks_like_the_exact_model(int8_service: EmbeddingService) -> None:
    query = "Does aspirin prevent heart attacks?"
    for key in (DEFAULT_MODEL_KEY, INT8_MODEL_KEY):
        scores = int8_service.embed_documents(SENTENCES, key) @ int8_service.embed_query(query, key)
        assert int(np.argmax(scores)) == 0, (key, scores.round(3))


def test_damaged_int8_file_is_made_again(int8_cache: Path, tmp_path: Path) -> None:
    exact = local.onnx_cache_path(packaged_source(), int8_cache)
    target = int8_path(exact, int8_cache)
    EmbeddingService(make_settings(tmp_path / "a", int8_cache), BreakerRegistry()).prepare(INT8_MODEL_KEY)
    sessions.unload_all()
    target.write_bytes(b"not an onnx file")
    svc = EmbeddingService(make_settings(tmp_path / "b", int8_cache), BreakerRegistry())
    messages: list[str] = []
    svc.prepare(INT8_MODEL_KEY, progress=messages.append)
    assert any("quantising" in m for m in messages), messages
    assert target.stat().st_size > 1_000_000
    assert svc.embed_query("hello", INT8_MODEL_KEY).shape == (384,)


def test_quantization_option_is_checked(tmp_path: Path) -> None:
    from agentloom.embeddings.records import InvalidFieldError

    registry = ModelRegistry(tmp_path / "models.db")
    registry.ensure_default()
    with pytest.raises(InvalidFieldError, match="config.quantization 'int4' is invalid: use int8"):
        registry.add_model("mine", "local", dimensions=384, config={"quantization": "int4"})
    mine = registry.add_model("mine", "local", dimensions=384, config={"quantization": "int8"})
    assert mine.config["quantization"] == "int8" and mine.fingerprint != _int8(registry).fingerprint
