"""Cold start: process spawn until the first `tools/list` answer, agentloom (every pack) vs a bare MCPServer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import median, write_section

HERE = Path(__file__).resolve().parent
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}


def time_to_tools_list(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin and proc.stdout
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}\n')
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{command} exited before answering tools/list")
        message = json.loads(line)
        if message.get("id") == 2:
            elapsed = time.perf_counter() - start
            break
    proc.stdin.close()
    proc.wait(timeout=30)
    return elapsed, len(message["result"]["tools"])


def run(runs: int = 5) -> str:
    with tempfile.TemporaryDirectory() as data:
        env = dict(os.environ, AGENTLOOM_DATA_DIR=data)
        ours_cmd = [str(Path(sys.executable).with_name("agentloom")), "serve"]
        bare_cmd = [sys.executable, str(HERE / "bare_server.py")]
        time_to_tools_list(ours_cmd, env)  # warm the OS file cache for both, equally
        time_to_tools_list(bare_cmd, env)
        ours, bare = [], []
        for _ in range(runs):  # interleaved so drift hits both alike
            t, tools = time_to_tools_list(ours_cmd, env)
            ours.append(t)
            bare.append(time_to_tools_list(bare_cmd, env)[0])
    ratio = median(ours) / median(bare)
    body = (
        f"| server | tools | median of {runs} (s) | min (s) | max (s) |\n|---|---|---|---|---|\n"
        f"| agentloom serve (every installed pack) | {tools} | {median(ours):.3f} | {min(ours):.3f} | {max(ours):.3f} |\n"
        f"| bare MCPServer, one tool (baseline) | 1 | {median(bare):.3f} | {min(bare):.3f} | {max(bare):.3f} |\n\n"
        f"Ratio agentloom / bare: **{ratio:.2f}x** (goal <= 1.25x).\n"
    )
    return body


def main() -> None:
    body = run()
    print(body)
    write_section("Cold start", body, "python -m benchmarks cold-start")


if __name__ == "__main__":
    main()
