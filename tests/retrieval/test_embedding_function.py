"""ServiceEmbeddingFunction in a real embedded Chroma: registered by name, so reopening a
collection rebuilds it without a warning, and a rebuilt one never downloads a model."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.utils.embedding_functions import (
    config_to_embedding_function,
    known_embedding_functions,
)
from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

from agentloom.retrieval.embedding_function import ServiceEmbeddingFunction

# What importing our module registered, read before any test runs (pytest imports every test
# module first). Chroma also registers a function's class by itself when a collection is
# created with it, which would hide a missing registration once any test has created one;
# a process that only opens existing collections (every start but the first) gets no such help.
REGISTERED_AT_IMPORT = known_embedding_functions.get("agentloom")
DIMS = 4


class FakeService:
    """Stands in for EmbeddingService: deterministic vectors, no model."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str | None]] = []

    def embed_documents(self, texts: list[str], model_key: str | None = None) -> list[list[float]]:
        self.calls.append((texts, model_key))
        return [[float(len(t)), 1.0, 0.0, 0.5] for t in texts]


def close(path: Path) -> None:
    """Stop the embedded Chroma open on this folder (only this one: other tests' stay open)."""
    system = SharedSystemClient._identifier_to_system.pop(str(path), None)
    SharedSystemClient._identifier_to_refcount.pop(str(path), None)
    if system is not None:
        system.stop()


def client(path: Path) -> Any:
    """A new embedded client that really reopens the files, as at the next start (Chroma shares
    one system per folder within a process, so the previous one is stopped first)."""
    close(path)
    return chromadb.PersistentClient(path=str(path), settings=chromadb.Settings(anonymized_telemetry=False))


@pytest.fixture
def path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "chroma"
    close(tmp_path / "chroma")


@pytest.fixture
def no_download(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chroma's default function (the one that downloads all-MiniLM-L6-v2) must never run."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Chroma's default embedding function was used (it downloads a model)")

    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__call__", refuse)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "_download_model_if_not_exists", refuse)


@pytest.fixture
def only_import_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry as a fresh start has it: only what importing our module registered, and
    no registration by Chroma when this test creates a collection."""
    from chromadb.api import collection_configuration

    monkeypatch.setattr(collection_configuration, "register_embedding_function", lambda cls: cls)
    monkeypatch.delitem(known_embedding_functions, "agentloom", raising=False)
    if REGISTERED_AT_IMPORT is not None:
        monkeypatch.setitem(known_embedding_functions, "agentloom", REGISTERED_AT_IMPORT)


@pytest.fixture
def warned(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    """A function that returns every warning raised (warnings module) or logged (WARNING and
    up) so far in the test."""
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield (
            lambda: (
                [str(w.message) for w in caught]
                + [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            )
        )


def test_registered_under_its_name() -> None:
    assert REGISTERED_AT_IMPORT is ServiceEmbeddingFunction
    assert known_embedding_functions["agentloom"] is ServiceEmbeddingFunction
    rebuilt = config_to_embedding_function({"name": "agentloom", "config": {"model_key": "m1"}})
    assert isinstance(rebuilt, ServiceEmbeddingFunction)
    assert rebuilt.model_key == "m1" and rebuilt.service is None
    assert not rebuilt.is_legacy()


@pytest.mark.usefixtures("only_import_registers", "no_download")
def test_reopen_in_a_new_client_warns_nothing(path: Path, warned: Callable[[], list[str]]) -> None:
    service = FakeService()
    first = client(path)
    created = first.create_collection(
        "docs",
        embedding_function=ServiceEmbeddingFunction(service, "m1"),  # type: ignore[arg-type]  # chromadb annotates it for documents and images; ours takes documents
        configuration={"hnsw": {"space": "cosine"}},
    )
    created.add(ids=["a"], documents=["alpha"])  # embedded by our function
    assert service.calls == [(["alpha"], "m1")]

    # A new client, as at the next start; the store opens collections with its function.
    second = client(path)
    reopened = second.get_collection("docs", embedding_function=ServiceEmbeddingFunction(service, "m1"))  # type: ignore[arg-type]  # chromadb annotates it for documents and images; ours takes documents
    reopened.add(ids=["b"], embeddings=[[0.1] * DIMS], documents=["beta"])  # reads the stored schema
    assert reopened.query(query_texts=["alpha"], n_results=1)["ids"] == [["a"]]
    assert reopened.configuration["embedding_function"].name() == "agentloom"
    assert reopened.schema is not None

    # The configuration Chroma stored names our function and its model, and rebuilds it.
    config = second.get_collection("docs").configuration
    ef = config["embedding_function"]
    assert isinstance(ef, ServiceEmbeddingFunction) and ef.model_key == "m1"

    assert not [m for m in warned() if "embedding function" in m.lower()], warned()


def test_the_warning_check_sees_chroma_warnings(path: Path, warned: Callable[[], list[str]]) -> None:
    """The check above is live: an unregistered function's name in a stored schema warns."""

    class Unregistered(ServiceEmbeddingFunction):
        @staticmethod
        def name() -> str:
            return "agentloom-unregistered-test"

    client(path).create_collection("docs", embedding_function=Unregistered(FakeService(), "m1"))  # type: ignore[arg-type]  # chromadb annotates it for documents and images; ours takes documents
    known_embedding_functions.pop("agentloom-unregistered-test", None)  # as in a process that only opens it
    client(path).get_collection("docs").add(ids=["a"], embeddings=[[0.1] * DIMS])
    assert any("Could not reconstruct embedding function agentloom-unregistered-test" in m for m in warned())


@pytest.mark.usefixtures("only_import_registers", "no_download")
def test_rebuilt_function_never_downloads(path: Path) -> None:
    """Opened without our function (as a store passing vectors explicitly might), Chroma rebuilds
    ours from the stored config; explicit vectors work, and embedding text is refused, not
    handed to Chroma's downloading default."""
    first = client(path)
    first.create_collection(
        "docs",
        embedding_function=ServiceEmbeddingFunction(FakeService(), "m1"),  # type: ignore[arg-type]  # chromadb annotates it for documents and images; ours takes documents
        configuration={"hnsw": {"space": "cosine"}},
    )
    reopened = client(path).get_collection("docs")
    reopened.add(ids=["a", "b"], embeddings=[[1.0, 0, 0, 0], [0, 1.0, 0, 0]], documents=["alpha", "beta"])
    assert reopened.query(query_embeddings=[[0.9, 0.1, 0, 0]], n_results=1)["ids"] == [["a"]]
    with pytest.raises(Exception, match="holds no embedding service"):
        reopened.query(query_texts=["alpha"], n_results=1)
    with pytest.raises(Exception, match="holds no embedding service"):
        reopened.add(ids=["c"], documents=["gamma"])


@pytest.mark.slow
def test_fresh_process_reopens_without_warning(tmp_path: Path) -> None:
    """What every start does: a new interpreter opens the existing collection the way the
    store does (importing our module, then adding and searching by vector), with every
    warning shown."""
    service_stub = "class S:\n    def embed_documents(self, texts, key=None): return [[1.0, 0, 0, 0] for _ in texts]\n"
    create = service_stub + textwrap.dedent(f"""
        import chromadb
        from agentloom.retrieval.embedding_function import ServiceEmbeddingFunction
        c = chromadb.PersistentClient(path={str(tmp_path)!r}, settings=chromadb.Settings(anonymized_telemetry=False))
        col = c.create_collection("docs", embedding_function=ServiceEmbeddingFunction(S(), "m1"),
                                  configuration={{"hnsw": {{"space": "cosine"}}}})
        col.add(ids=["a"], documents=["alpha"])
    """)
    reopen = service_stub + textwrap.dedent(f"""
        import logging, warnings
        logging.basicConfig(level=logging.WARNING)
        warnings.simplefilter("always")
        import chromadb
        from chromadb.utils.embedding_functions import known_embedding_functions
        assert "agentloom" not in known_embedding_functions
        from agentloom.retrieval.embedding_function import ServiceEmbeddingFunction
        assert known_embedding_functions["agentloom"] is ServiceEmbeddingFunction
        c = chromadb.PersistentClient(path={str(tmp_path)!r}, settings=chromadb.Settings(anonymized_telemetry=False))
        col = c.get_collection("docs", embedding_function=ServiceEmbeddingFunction(S(), "m1"))
        col.add(ids=["b"], embeddings=[[0.0, 1.0, 0, 0]], documents=["beta"])
        assert col.query(query_embeddings=[[1.0, 0, 0, 0]], n_results=1)["ids"] == [["a"]]
        print("reopened", col.count())
    """)
    for script in (create, reopen):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "reopened 2"
    assert "Could not reconstruct" not in done.stderr and "embedding function" not in done.stderr.lower(), done.stderr
