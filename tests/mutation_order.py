"""Under mutation testing (``python -m benchmarks mutation``), a mutant's tests run fastest first.

mutmut runs each mutant against the tests that reached the mutated function, with ``-x``, and passes
them in no particular order: a mutant that a 10-ms unit test kills could first wait for a 10-s test
that refreshes and embeds a whole catalog. The durations are mutmut's own, measured by its first,
unmutated run (``mutmut-stats.json`` in the folder the mutants run in; absent during that run, so it
runs in the usual order). Outside mutation testing nothing changes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.hookimpl(trylast=True)  # after pytest groups tests by fixture scope: the durations decide
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    stats = Path("mutmut-stats.json")
    if not os.environ.get("AGENTLOOM_MUTATION") or not stats.is_file():
        return
    durations: dict[str, float] = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: durations.get(item.nodeid, float("inf")))  # stable: unknown tests keep their order, last
