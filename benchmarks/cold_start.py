"""Cold start: process spawn until the first `tools/list` answer, agentloom (every pack; also with 1,000 skills on
disk for the skills pack; also without the tool cache) vs a bare MCPServer."""

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


def _skills_env(env: dict[str, str], base: Path, agentloom: str, n: int) -> dict[str, str]:
    """``env`` with a skills root of ``n`` skill folders, indexed beforehand (a restart's steady state)."""
    from benchmarks.skills import make_skills

    root = make_skills(base / "skills-root", n)
    skills_env = dict(env, AGENTLOOM_SKILLS__ROOTS=str(root))
    started = time.perf_counter()
    subprocess.run(
        [agentloom, "skills", "index", "--json"],
        env=skills_env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    print(f"indexed {n} skills in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return skills_env


def _cache_folder(base: Path, *, tool_cache: bool) -> str:
    """A cache folder of the run's own: the tool cache in it is this checkout's (another checkout serving
    from the shared folder would replace it). Without ``tool_cache`` the tool cache cannot be kept there (a
    file where its folder would be), so every start builds every tool, as the server would without it (plus
    the cache's own look, a few ms). The prepared embedding model is the usual one: no start prepares it."""
    from agentloom.core.settings import Settings

    cache = base / ("cache" if tool_cache else "cache-without-tools")
    cache.mkdir()
    if not tool_cache:
        (cache / "tools").write_text("a file where the tool cache's folder would be")
    (cache / "models").symlink_to(Path(Settings().cache_dir) / "models")
    return str(cache)


def run(runs: int = 11, skills: int = 1000) -> str:
    with tempfile.TemporaryDirectory() as data:
        env = dict(os.environ, AGENTLOOM_DATA_DIR=data, AGENTLOOM_CACHE_DIR=_cache_folder(Path(data), tool_cache=True))
        agentloom = str(Path(sys.executable).with_name("agentloom"))
        ours_cmd = [agentloom, "serve"]
        bare_cmd = [sys.executable, str(HERE / "bare_server.py")]
        skills_env = _skills_env(env, Path(data), agentloom, skills)
        # (label, command, environment): the skills rows are the same server with a root of many skills;
        # its scan runs in a background thread, after scan_delay_seconds (3 s by default) or at once.
        cases = [
            ("agentloom serve (every installed pack)", ours_cmd, env),
            (
                "agentloom serve, without the tool cache",
                ours_cmd,
                dict(env, AGENTLOOM_CACHE_DIR=_cache_folder(Path(data), tool_cache=False)),
            ),
            (f"agentloom serve, {skills:,} skills in a root (scan after the default delay)", ours_cmd, skills_env),
            (
                f"agentloom serve, {skills:,} skills in a root, scan_delay_seconds=0",
                ours_cmd,
                dict(skills_env, AGENTLOOM_SKILLS__SCAN_DELAY_SECONDS="0"),
            ),
            ("bare MCPServer, one tool (baseline)", bare_cmd, env),
        ]
        for _, command, case_env in cases:  # warm the OS file cache for each, equally
            time_to_tools_list(command, case_env)
        times: list[list[float]] = [[] for _ in cases]
        tools: list[int] = [0 for _ in cases]
        for round_ in range(runs):  # interleaved so drift hits every case alike, in a rotating order
            for k in range(len(cases)):  # so no case always follows the same one
                i = (round_ + k) % len(cases)
                _, command, case_env = cases[i]
                t, tools[i] = time_to_tools_list(command, case_env)
                times[i].append(t)
    bare = median(times[-1])
    rows = "".join(
        f"| {label} | {tools[i]} | {median(times[i]):.3f} | {min(times[i]):.3f} | {max(times[i]):.3f} |\n"
        for i, (label, _, _) in enumerate(cases)
    )
    ratios = "; ".join(f"{label}: **{median(times[i]) / bare:.2f}x**" for i, (label, _, _) in enumerate(cases[:-1]))
    return (
        f"| server | tools | median of {runs} (s) | min (s) | max (s) |\n|---|---|---|---|---|\n{rows}\n"
        f"Ratio to the bare server (goal <= 1.25x): {ratios}.\n\n"
        f"The tool cache (`server/toolcache.py`) is kept while the server without it misses the goal: "
        f"{median(times[1]) / bare:.2f}x without it, {median(times[0]) / bare:.2f}x with it.\n"
    )


def main() -> None:
    body = run()
    print(body)
    write_section("Cold start", body, "python -m benchmarks cold-start")


if __name__ == "__main__":
    main()
