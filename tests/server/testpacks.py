"""A third-party package with agentloom packs, installed on the fly through a .dist-info folder.

Nothing in this repository's pyproject names these packs: the server can only find
them through the ``agentloom.packs`` entry-point group.
"""

from __future__ import annotations

from pathlib import Path

PACK_MODULE = '''
import sys
from dataclasses import dataclass

from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError
from agentloom.core.health import Check
from agentloom.server.packs import Pack, PackContext


class EchoResult(TypedDict):
    text: str
    times: int


echo_pack = Pack("echo", "Echoes text back")


@echo_pack.tool(read_only=True)
def echo(text: str, times: int = 1) -> EchoResult:
    """Repeat a text a number of times."""
    if times < 1:
        raise AgentloomError("times: must be at least 1, got %d; pass a positive count" % times)
    return {"text": text * times, "times": times}


@echo_pack.tool(destructive=True)
def echo_forget(key: str) -> str:
    """Forget a stored echo (destructive, for annotation tests)."""
    return "forgot " + key


@dataclass
class EchoStore:
    path: str


@echo_pack.setup
def echo_setup(ctx: PackContext) -> EchoStore:
    return EchoStore(str(ctx.data_dir))


@echo_pack.health
def echo_health(store: EchoStore) -> list[Check]:
    return [Check("echo store reachable", True, store.path)]


broken_pack = Pack("broken", "Fails during setup")


@broken_pack.tool()
def broken_tool() -> str:
    """Never registered."""
    return "unreachable"


@broken_pack.setup
def broken_setup(ctx: PackContext) -> None:
    raise ConnectionError("database at 127.0.0.1:1 unreachable")


missing_pack = Pack(
    "needs_missing",
    "Needs a library that is not installed",
    requires=["agentloom_no_such_lib"],
    install="'agentloom-no-such-lib[extra]'",
)


@missing_pack.tool()
def missing_tool() -> str:
    """Never registered."""
    return "unreachable"


noisy_pack = Pack("noisy", "Prints to stdout, which must never reach the protocol stream")


@noisy_pack.setup
def noisy_setup(ctx: PackContext) -> None:
    print("noisy setup output on stdout")


@noisy_pack.tool(read_only=True)
def noisy() -> str:
    """Print to stdout, then answer."""
    print("noisy tool output on stdout")
    sys.stdout.flush()
    return "still clean"


not_a_pack = 42
'''

ENTRY_POINTS = """
[agentloom.packs]
echo = agentloom_testpacks:echo_pack
broken = agentloom_testpacks:broken_pack
needs_missing = agentloom_testpacks:missing_pack
noisy = agentloom_testpacks:noisy_pack
badimport = agentloom_testpacks_missing.module:pack
notapack = agentloom_testpacks:not_a_pack
"""


def install_testpacks(site: Path) -> Path:
    (site / "agentloom_testpacks").mkdir(parents=True, exist_ok=True)
    (site / "agentloom_testpacks" / "__init__.py").write_text(PACK_MODULE)
    dist = site / "agentloom_testpacks-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: agentloom-testpacks\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    return site
