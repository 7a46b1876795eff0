from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.testpacks import install_testpacks


@pytest.fixture
def pack_env(server_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    site = install_testpacks(tmp_path / "site")
    server_env["PYTHONPATH"] = str(site)
    return server_env
