"""OpenAI-compatible and Ollama providers against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from agentloom.core.breakers import (
    BreakerRegistry,
    CircuitOpenError,
    State,
)
from agentloom.core.errors import AgentloomError, ConfigError, DependencyUnavailable
from agentloom.embeddings import ModelRegistry
from agentloom.embeddings.providers import make_provider

from .conftest import ServerState, fake_vector, make_settings

KEY = "sk-test-secret-key-123"


def _normalised(text: str, dims: int) -> np.ndarray:
    v = np.asarray(fake_vector(text, dims), dtype=np.float32)
    return v / np.linalg.norm(v)


def _provider(
    tmp_path: Path,
    breakers: BreakerRegistry,
    kind: str,
    base_url: str,
    *,
    key: str | None = KEY,
    key_env: str | None = None,
    model: str = "text-embedding-3-small",
    dims: int = 8,
    config: dict | None = None,
):
    registry = ModelRegistry(tmp_path / "models.db")
    prec = registry.upsert_provider("remote", kind, base_url=base_url, api_key=key, api_key_env=key_env)
    record = registry.add_model(model, "remote", dimensions=dims, config=config)
    settings = make_settings(tmp_path, tmp_path / "cache")
    return make_provider(record, prec, settings, breakers)


# -- OpenAI-compatible ------------------------------------------------------------------------
def test_openai_batch_in_one_request_with_bearer(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    provider = _provider(tmp_path, BreakerRegistry(), "openai", url + "/v1")
    texts = ["Git提交工具", "文件读取工具", "计算工具"]
    vectors = provider.embed(texts)
    assert vectors.shape == (3, 8) and vectors.dtype == np.float32
    assert len(state.requests) == 1
    req = state.requests[0]
    assert req["path"] == "/v1/embeddings"
    assert req["headers"]["Authorization"] == f"Bearer {KEY}"
    assert req["body"] == {"input": texts, "model": "text-embedding-3-small", "encoding_format": "float"}
    for text, vec in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vec, _normalised(text, 8), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert provider.tokenizer is None and provider.max_tokens is None
    provider.close()


def test_openai_orders_by_index_and_sends_dimensions(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    state.mode = "shuffle"
    provider = _provider(
        tmp_path,
        BreakerRegistry(),
        "openai",
        url + "/v1",
        config={"api_endpoint": "/embeddings", "send_dimensions": True, "timeout": 5},
    )
    texts = [f"text number {i}" for i in range(5)]
    vectors = provider.embed(texts)
    for text, vec in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vec, _normalised(text, 8), rtol=1e-6)
    assert state.requests[0]["body"]["dimensions"] == 8


def test_openai_key_from_environment(
    tmp_path: Path, http_server: tuple[str, ServerState], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state = http_server
    monkeypatch.setenv("AGL_EMBED_KEY", KEY)
    provider = _provider(tmp_path, BreakerRegistry(), "openai", url + "/v1", key=None, key_env="AGL_EMBED_KEY")
    provider.embed(["x"])
    assert state.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    monkeypatch.delenv("AGL_EMBED_KEY")
    with pytest.raises(ConfigError, match="has no API key.*AGL_EMBED_KEY is empty"):
        provider.embed(["x"])
    assert len(state.requests) == 1  # no request without a key


def test_dimension_mismatch_is_a_clear_error(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    state.mode = "wrong_dims"
    breakers = BreakerRegistry()
    provider = _provider(tmp_path, breakers, "openai", url + "/v1")
    with pytest.raises(ConfigError, match="returned 6-dimensional vectors, expected 8"):
        provider.embed(["a", "b"])
    assert breakers.get("embeddings:remote").status().failures == 0


def test_401_is_clear_and_does_not_count(
    tmp_path: Path, http_server: tuple[str, ServerState], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url, state = http_server
    state.api_key = "another-key"
    breakers = BreakerRegistry(failure_threshold=3)
    provider = _provider(tmp_path, breakers, "openai", url + "/v1")
    for _ in range(4):
        with pytest.raises(AgentloomError, match="HTTP 401.*check the API key of provider 'remote'") as info:
            provider.embed(["hello"])
        assert KEY not in str(info.value)
    status = breakers.get("embeddings:remote").status()
    assert status.state is State.CLOSED and status.failures == 0
    assert len(state.requests) == 4
    assert KEY not in caplog.text


def test_other_4xx_does_not_count(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    state.mode = "error:400"
    breakers = BreakerRegistry(failure_threshold=3)
    provider = _provider(tmp_path, breakers, "openai", url + "/v1")
    for _ in range(3):
        with pytest.raises(AgentloomError, match="HTTP 400.*simulated 400"):
            provider.embed(["hello"])
    assert breakers.get("embeddings:remote").state is State.CLOSED


def test_three_500s_open_the_breaker_and_the_fourth_fails_fast(
    tmp_path: Path, http_server: tuple[str, ServerState]
) -> None:
    url, state = http_server
    state.mode = "error:500"
    breakers = BreakerRegistry(failure_threshold=3)
    provider = _provider(tmp_path, breakers, "openai", url + "/v1")
    for _ in range(3):
        with pytest.raises(DependencyUnavailable, match="HTTP 500"):
            provider.embed(["hello"])
    assert breakers.get("embeddings:remote").state is State.OPEN
    with pytest.raises(CircuitOpenError, match="embeddings:remote unavailable"):
        provider.embed(["hello"])
    assert len(state.requests) == 3  # the 4th call never reached the server


def test_connection_refused_opens_the_breaker(tmp_path: Path, closed_port_url: str) -> None:
    breakers = BreakerRegistry(failure_threshold=3)
    provider = _provider(tmp_path, breakers, "openai", closed_port_url + "/v1")
    for _ in range(3):
        with pytest.raises(DependencyUnavailable, match="unreachable"):
            provider.embed(["hello"])
    with pytest.raises(CircuitOpenError):
        provider.embed(["hello"])


def test_timeout_counts_as_a_failure(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    state.delay = 0.5
    breakers = BreakerRegistry(failure_threshold=3)
    provider = _provider(tmp_path, breakers, "openai", url + "/v1", config={"timeout": 0.1})
    with pytest.raises(DependencyUnavailable, match="timed out after 0.1s"):
        provider.embed(["slow"])
    assert breakers.get("embeddings:remote").status().failures == 1


def test_success_resets_the_failure_count(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    breakers = BreakerRegistry(failure_threshold=3)
    provider = _provider(tmp_path, breakers, "openai", url + "/v1")
    state.mode = "error:503"
    for _ in range(2):
        with pytest.raises(DependencyUnavailable):
            provider.embed(["x"])
    state.mode = "ok"
    provider.embed(["x"])
    assert breakers.get("embeddings:remote").status().failures == 0


# -- Ollama -----------------------------------------------------------------------------------
def test_ollama_wire_format(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    state.api_key = None
    state.dims = 16
    provider = _provider(tmp_path, BreakerRegistry(), "ollama", url, key=None, model="nomic-embed-text", dims=16)
    vectors = provider.embed(["代码分析工具", "second"])
    assert vectors.shape == (2, 16)
    req = state.requests[0]
    assert req["path"] == "/api/embed"
    assert req["body"] == {"model": "nomic-embed-text", "input": ["代码分析工具", "second"], "truncate": True}
    assert "Authorization" not in req["headers"]
    np.testing.assert_allclose(vectors[0], _normalised("代码分析工具", 16), rtol=1e-6)


def test_ollama_unknown_model_says_pull(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    state.api_key = None
    breakers = BreakerRegistry()
    provider = _provider(tmp_path, breakers, "ollama", url, key=None, model="missing-model", dims=16)
    with pytest.raises(AgentloomError, match="ollama pull missing-model"):
        provider.embed(["x"])
    assert breakers.get("embeddings:remote").status().failures == 0


def test_ollama_failures_open_the_breaker(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    state.mode = "error:502"
    breakers = BreakerRegistry(failure_threshold=3)
    provider = _provider(tmp_path, breakers, "ollama", url, key=None, model="nomic-embed-text", dims=16)
    for _ in range(3):
        with pytest.raises(DependencyUnavailable, match="HTTP 502"):
            provider.embed(["x"])
    with pytest.raises(CircuitOpenError):
        provider.embed(["x"])
    assert len(state.requests) == 3


def test_empty_input_makes_no_request(tmp_path: Path, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    provider = _provider(tmp_path, BreakerRegistry(), "openai", url + "/v1")
    assert provider.embed([]).shape == (0, 8)
    assert state.requests == []
