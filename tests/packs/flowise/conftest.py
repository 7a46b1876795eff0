"""Fixtures: a fake Flowise 3.1.2 per test, and one real Flowise 3.1.2 per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any, NoReturn

import pytest

from tests.packs.flowise import live
from tests.packs.flowise.fake_flowise import FakeFlowise, live_data_missing, real_catalog
from tests.packs.flowise.live import FlowiseUnavailable


def unavailable(reason: str) -> NoReturn:
    """Skip outside CI; CI runs every test, so there it fails."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def catalog() -> dict[str, dict[str, Any]]:
    """The real Flowise 3.1.2 catalog by node name (fresh per module: a test may change it)."""
    missing = live_data_missing()
    if missing:
        unavailable(missing)
    return real_catalog()


@pytest.fixture
def fake_flowise() -> Iterator[FakeFlowise]:
    """A fresh fake Flowise 3.1.2, listening; ``.url``, ``.api_key``, ``.nodes``, ``.fail_next()``..."""
    missing = live_data_missing()
    if missing:
        unavailable(missing)
    with FakeFlowise() as fake:
        yield fake


@pytest.fixture
def stopped() -> FakeFlowise:
    """A fake Flowise that no longer listens: any request made to it fails."""
    with FakeFlowise() as fake:
        pass
    return fake


@pytest.fixture(scope="session")
def live_flowise(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``(url, api_key)`` of a real Flowise 3.1.2 (scripts/flowise-test-server.sh), shared by the session."""
    with ExitStack() as stack:
        try:
            url_key = stack.enter_context(live.live_flowise(tmp_path_factory.mktemp("flowise")))
        except FlowiseUnavailable as exc:
            unavailable(f"real Flowise unavailable: {exc}")
        yield url_key
