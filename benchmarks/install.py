"""Installs as people make them, from a fresh clone of this repository's HEAD.

- ``scripts/setup.sh`` (the README's first command, without the server start): wall time and
  the size of ``.venv``; once with this machine's package caches (pip, npm) as they are, once
  with empty ones (everything downloaded again).
- ``pip install '.[all]'`` into a new venv, resolved by pip from the package index (no lock),
  ``pipx install .`` and ``uvx --from . agentloom serve`` (pipx and uv from PyPI, their homes
  and caches empty): each must answer an MCP ``tools/list`` over stdio, and none may hold torch.

Baseline: the set-up the issue measured before torch left it, 1 min 46 s and 1.9 GB.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cold_start import time_to_tools_list
from benchmarks.report import ROOT, write_section

BEFORE_SECONDS = 106
BEFORE_MB = 1900
GOAL_SECONDS = 60
GOAL_MB = 800
HEAVY = ("torch", "transformers", "sentence_transformers", "scipy", "sklearn", "sympy")


def du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1024


def _largest(venv: Path, n: int = 10) -> str:
    """The n largest entries of the venv's site-packages, '.dist-info' folders aside."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    sizes = [(du_mb(p), p.name) for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")]
    return ", ".join(f"{name} {mb:.0f}" for mb, name in sorted(sizes, reverse=True)[:n])


def heavy_in(venv_python: Path) -> list[str]:
    code = f"import importlib.util as u; print(','.join(m for m in {HEAVY!r} if u.find_spec(m)))"
    out = subprocess.run([str(venv_python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    return [m for m in out.split(",") if m]


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started


def tools_list(command: list[str], env: dict[str, str]) -> int:
    return time_to_tools_list(command, env)[1]


def main() -> None:
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLOOM_", "VIRTUAL_ENV"))}
        base_env.update(AGENTLOOM_DATA_DIR=str(tmp / "data"), XDG_CACHE_HOME=str(tmp / "xdg-cache"))
        setup: dict[str, tuple[float, float]] = {}
        for caches in ("warm", "cold"):
            clone = tmp / f"clone-{caches}"
            subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
            env = dict(base_env)
            if caches == "cold":
                env.update(PIP_CACHE_DIR=str(tmp / "pip-cache"), npm_config_cache=str(tmp / "npm-cache"))
            seconds = timed(["scripts/setup.sh"], clone, env)
            setup[caches] = (seconds, du_mb(clone / ".venv"))
            if caches == "warm":
                largest = _largest(clone / ".venv")
            assert not heavy_in(clone / ".venv" / "bin" / "python"), "setup.sh installed a deep-learning package"
            print(f"setup.sh, {caches} caches: {seconds:.0f} s, {setup[caches][1]:.0f} MB", file=sys.stderr)
        clone = tmp / "clone-warm"
        tools = tools_list([str(clone / ".venv" / "bin" / "agentloom"), "serve"], base_env)
        rows.append(
            f"| `scripts/setup.sh` (lock files), this machine's caches | {setup['warm'][0]:.0f} s | "
            f"{setup['warm'][1]:.0f} MB | {tools} |"
        )
        rows.append(
            f"| `scripts/setup.sh`, empty pip and npm caches | {setup['cold'][0]:.0f} s | {setup['cold'][1]:.0f} MB | |"
        )

        # The installs of people who only want the server: no lock, pip/pipx/uv resolve from the index.
        tooling = tmp / "tooling"
        subprocess.run([sys.executable, "-m", "venv", str(tooling)], check=True)
        subprocess.run([str(tooling / "bin" / "pip"), "install", "-q", "pipx", "uv"], check=True)
        venv = tmp / "pip-all"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        seconds = timed([str(venv / "bin" / "pip"), "install", "-q", ".[all]"], clone, base_env)
        assert not heavy_in(venv / "bin" / "python")
        timed([str(venv / "bin" / "agentloom"), "models", "prepare"], clone, base_env)
        tools = tools_list([str(venv / "bin" / "agentloom"), "serve"], base_env)
        rows.append(f"| `pip install '.[all]'` in a new venv | {seconds:.0f} s | {du_mb(venv):.0f} MB | {tools} |")

        pipx_env = dict(
            base_env,
            PIPX_HOME=str(tmp / "pipx"),
            PIPX_BIN_DIR=str(tmp / "pipx-bin"),
            PIP_CACHE_DIR=str(tmp / "pipx-pip-cache"),
        )
        seconds = timed([str(tooling / "bin" / "pipx"), "install", "."], clone, pipx_env)
        pipx_venv = tmp / "pipx" / "venvs" / "agentloom"
        assert not heavy_in(pipx_venv / "bin" / "python")
        tools = tools_list([str(tmp / "pipx-bin" / "agentloom"), "serve"], base_env)
        rows.append(f"| `pipx install .` (no extras) | {seconds:.0f} s | {du_mb(pipx_venv):.0f} MB | {tools} |")

        uv_env = dict(base_env, UV_CACHE_DIR=str(tmp / "uv-cache"), UV_TOOL_DIR=str(tmp / "uv-tools"))
        uvx = [str(tooling / "bin" / "uvx"), "--from", str(clone), "agentloom", "serve"]
        started = time.perf_counter()
        tools = tools_list(uvx, uv_env)
        first = time.perf_counter() - started
        rows.append(
            f"| `uvx --from . agentloom serve` (no extras), first start incl. install | {first:.0f} s | "
            f"{du_mb(tmp / 'uv-cache'):.0f} MB (uv cache) | {tools} |"
        )
        uvx_all = [str(tooling / "bin" / "uvx"), "--from", f"{clone}[all]", "agentloom", "serve"]
        started = time.perf_counter()
        tools = tools_list(uvx_all, uv_env)
        rows.append(
            f"| `uvx --from '.[all]' agentloom serve`, first start incl. install | {time.perf_counter() - started:.0f} "
            "s | "
            f"{du_mb(tmp / 'uv-cache'):.0f} MB (uv cache, both) | {tools} |"
        )
        shutil.rmtree(tmp / "uv-cache", ignore_errors=True)

    warm_s, warm_mb = setup["warm"]
    body = (
        "From a fresh clone of HEAD. None of these installs holds torch, transformers, "
        "sentence-transformers, scipy, scikit-learn or sympy (checked in each venv). "
        "`tools` is the number of tools the installed `agentloom serve` lists over stdio (a base install "
        "skips vectors, skills and flowise, naming the extra to install). Where pip is configured with a "
        "local mirror of the index (as on this machine), empty caches still download little.\n\n"
        "| install | time | size | tools |\n|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"`scripts/setup.sh` against the set-up before torch left it ({BEFORE_SECONDS} s, {BEFORE_MB} MB): "
        f"time **{warm_s / BEFORE_SECONDS:.2f}x** (goal <= {GOAL_SECONDS} s: "
        f"{'met' if warm_s <= GOAL_SECONDS else 'not met'}), "
        f".venv **{warm_mb / BEFORE_MB:.2f}x** (goal <= {GOAL_MB} MB: {'met' if warm_mb <= GOAL_MB else 'not met'}). "
        f"Largest in it (MB, bytecode included): {largest}.\n"
    )
    print(body)
    write_section("Install", body, "python -m benchmarks install")


if __name__ == "__main__":
    main()
