"""The embedding service: defaults, runtime switching, TTL, caching, batching, health."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from agentloom.core.breakers import BreakerRegistry
from agentloom.core.errors import AgentloomError
from agentloom.embeddings import EmbeddingService, ModelRegistry

from .conftest import ServerState, make_settings

KEY = "sk-test-secret-key-123"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _add_api_model(registry: ModelRegistry, url: str, *, dims: int = 8, default: bool = False):
    registry.upsert_provider("openai", "openai", base_url=url + "/v1", api_key=KEY)
    return registry.add_model(
        "text-embedding-3-small",
        "openai",
        dimensions=dims,
        is_default=default,
        config={"api_endpoint": "/embeddings", "timeout": 5},
    )


def test_construction_is_cheap_and_touches_nothing(tmp_path: Path, model_cache_dir: Path) -> None:
    settings = make_settings(tmp_path / "data", model_cache_dir)
    EmbeddingService(settings, BreakerRegistry())
    assert not (tmp_path / "data").exists()


def test_missing_configuration_creates_the_default(service: EmbeddingService) -> None:
    record = service.model()
    assert (record.key, record.kind, record.dimensions, record.is_default, record.enabled) == (
        "all-MiniLM-L6-v2",
        "local",
        384,
        True,
        True,
    )
    assert (service.settings.data_dir / "models.db").is_file()
    assert service.model().id == record.id


def test_switching_default_takes_effect_on_next_call(
    onnx_file: Path, service: EmbeddingService, http_server: tuple[str, ServerState]
) -> None:
    url, state = http_server
    a = service.model()
    assert service.embed_query("hello").shape == (384,)
    b = _add_api_model(service.registry, url)
    assert service.embed_query("hello").shape == (384,)  # B is not the default yet
    service.registry.update_model(b.id, is_default=True)  # LLMConfigService.updateModel(B, {isDefault: true})
    vec = service.embed_query("hello")
    assert vec.shape == (8,) and len(state.requests) == 1  # model B, no restart
    models = {m.id: m for m in service.registry.list_models()}
    assert a.id in models and not models[a.id].is_default  # old configuration retained
    # And back: the local model answers again (and was not loaded twice).
    service.registry.update_model(a.id, is_default=True)
    assert service.embed_query("hello").shape == (384,)


def test_change_by_another_process_is_seen_after_the_ttl(
    tmp_path: Path, model_cache_dir: Path, http_server: tuple[str, ServerState]
) -> None:
    url, _ = http_server
    clock = FakeClock()
    settings = make_settings(tmp_path / "data", model_cache_dir, config_ttl_seconds=300)
    svc = EmbeddingService(settings, BreakerRegistry(), clock=clock)
    assert svc.model().key == "all-MiniLM-L6-v2"
    other = ModelRegistry(tmp_path / "data" / "models.db")  # "another process": no link to svc
    b = _add_api_model(other, url)
    other.update_model(b.id, is_default=True)
    clock.now += 299
    assert svc.model().key == "all-MiniLM-L6-v2"  # still cached
    clock.now += 2
    assert svc.model().id == b.id  # re-read after 300 s


def test_ttl_zero_reads_every_time(tmp_path: Path, model_cache_dir: Path, http_server: tuple[str, ServerState]) -> None:
    url, _ = http_server
    svc = EmbeddingService(make_settings(tmp_path / "data", model_cache_dir, config_ttl_seconds=0), BreakerRegistry())
    assert svc.model().kind == "local"
    other = ModelRegistry(tmp_path / "data" / "models.db")
    b = _add_api_model(other, url, default=True)
    assert svc.model().id == b.id


def test_invalidate_drops_the_cached_configuration(
    tmp_path: Path, model_cache_dir: Path, http_server: tuple[str, ServerState]
) -> None:
    url, _ = http_server
    svc = EmbeddingService(make_settings(tmp_path / "data", model_cache_dir), BreakerRegistry(), clock=FakeClock())
    svc.model()
    other = ModelRegistry(tmp_path / "data" / "models.db")
    b = _add_api_model(other, url, default=True)
    assert svc.model().kind == "local"
    svc.invalidate()
    assert svc.model().id == b.id


def test_unknown_or_disabled_key_falls_back_to_default(
    service: EmbeddingService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    default = service.model()
    assert service.model("no-such-model").id == default.id
    assert "'no-such-model' is not configured; using the default model 'all-MiniLM-L6-v2'" in caplog.text
    off = service.registry.add_model("off-model", "local", dimensions=384, enabled=False)
    caplog.clear()
    assert service.model("off-model").id == default.id
    assert "'off-model' is disabled" in caplog.text
    service.registry.update_model(off.id, enabled=True)
    assert service.model("off-model").id == off.id


def test_query_cache_hits_and_model_isolation(service: EmbeddingService, http_server: tuple[str, ServerState]) -> None:
    url, state = http_server
    service.model()
    b = _add_api_model(service.registry, url, default=True)
    v1 = service.embed_query("same text")
    v2 = service.embed_query("same text")
    assert len(state.requests) == 1 and np.array_equal(v1, v2)
    v1[0] = 42.0  # callers get copies: the cache stays intact
    assert service.embed_query("same text")[0] != 42.0
    # A config change (new fingerprint) bypasses old entries.
    service.registry.update_model(b.id, config={"api_endpoint": "/embeddings", "timeout": 6})
    service.embed_query("same text")
    assert len(state.requests) == 2


def test_query_cache_can_be_disabled(
    tmp_path: Path, model_cache_dir: Path, http_server: tuple[str, ServerState]
) -> None:
    url, state = http_server
    svc = EmbeddingService(make_settings(tmp_path / "d", model_cache_dir, query_cache_size=0), BreakerRegistry())
    svc.model()
    _add_api_model(svc.registry, url, default=True)
    svc.embed_query("x")
    svc.embed_query("x")
    assert len(state.requests) == 2


def test_embed_documents_batches_in_order_with_progress(
    tmp_path: Path, model_cache_dir: Path, http_server: tuple[str, ServerState]
) -> None:
    url, state = http_server
    svc = EmbeddingService(make_settings(tmp_path / "d", model_cache_dir, batch_size=4), BreakerRegistry())
    svc.model()
    _add_api_model(svc.registry, url, default=True)
    texts = [f"document {'x' * (i % 5)} {i}" for i in range(10)]
    calls: list[tuple[int, int]] = []
    vectors = svc.embed_documents(texts, progress=lambda done, total: calls.append((done, total)))
    assert vectors.shape == (10, 8)
    assert calls == [(4, 10), (8, 10), (10, 10)]
    assert [len(r["body"]["input"]) for r in state.requests] == [4, 4, 2]  # one POST per batch
    for text, vec in zip(texts, vectors, strict=True):
        assert np.allclose(vec, svc.embed_query(text), atol=1e-6)
    assert svc.embed_documents([]).shape == (0, 8)
    with pytest.raises(AgentloomError, match=r"texts\[1\] must be a string"):
        svc.embed_documents(["ok", 3])  # type: ignore[list-item]  # a wrong type on purpose: the check under test


def test_api_model_has_no_tokenizer(service: EmbeddingService, http_server: tuple[str, ServerState]) -> None:
    url, _ = http_server
    service.model()
    _add_api_model(service.registry, url, default=True)
    assert service.tokenizer() is None and service.max_tokens() is None


def test_check_reports_without_raising(onnx_file: Path, service: EmbeddingService, closed_port_url: str) -> None:
    ok = service.check()
    assert (
        ok["ok"] is True and ok["model"] == "all-MiniLM-L6-v2" and ok["provider"] == "local" and ok["dimensions"] == 384
    )
    _add_api_model(service.registry, closed_port_url, default=True)
    bad = service.check()
    assert bad["ok"] is False and bad["provider"] == "openai" and "unreachable" in bad["detail"]


def test_api_key_not_logged_through_the_service(
    service: EmbeddingService, http_server: tuple[str, ServerState], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url, state = http_server
    service.model()
    _add_api_model(service.registry, url, default=True)
    service.embed_documents(["a", "b"])
    state.api_key = "other"
    with pytest.raises(AgentloomError) as info:
        service.embed_query("c")
    assert KEY not in str(info.value)
    assert KEY not in caplog.text
    assert KEY not in repr(service.model()) and KEY not in str(service.model().as_dict())


def test_concurrent_queries_are_consistent(onnx_file: Path, service: EmbeddingService) -> None:
    texts = [f"concurrent query {i % 4}" for i in range(24)]
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = service.embed_query(texts[i])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    expected = service.embed_documents(texts[:4])
    for i, vec in results.items():
        assert float(np.dot(vec, expected[i % 4])) > 0.9999
