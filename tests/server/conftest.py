from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.server.testpacks import install_testpacks


@pytest.fixture
def pack_env(server_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    site = install_testpacks(tmp_path / "site")
    # Kept after the test packs: a checkout run with PYTHONPATH=src (a worktree beside an editable
    # install) serves its own code.
    server_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), server_env.get("PYTHONPATH")]))
    return server_env
