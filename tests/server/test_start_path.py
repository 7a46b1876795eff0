"""The server's start path stays light: the heavy libraries load on first use, not before
the first ``tools/list`` (see the cold-start benchmark; numpy alone costs ~0.1 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

HEAVY = ("numpy", "chromadb", "lancedb", "onnxruntime", "tokenizers", "torch", "yaml", "psycopg", "sqlalchemy")

PROBE = """
import json, sys
from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
host = Host(Settings(data_dir=sys.argv[1]), discover_packs())
names = host.server.tool_names()
print(json.dumps({"tools": len(names), "loaded": [m for m in sys.argv[2:] if m in sys.modules]}))
"""


def test_building_the_server_imports_no_heavy_library(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path), *HEAVY], capture_output=True, text=True, timeout=120, check=True
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["tools"] >= 20  # every installed pack was loaded
    assert report["loaded"] == []
