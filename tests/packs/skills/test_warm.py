"""A search in a new process: first-use builds announced, then answered from the warm copy and the cached models."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

from agentloom.packs.skills import warm
from tests.conftest import PYTHON
from tests.packs.skills.conftest import SEED_SKILLS, make_index, names, write_skill

# A CLI search with warm caches measured 1.8 s of CPU (user + sys), 2.5 s wall (median; best 1.8 s) on 2 cores
# (BENCHMARKS.md, "CLI warm"); at 8f2fef7, 5.8 s of CPU and 7.9 s wall. CPU time is asserted (a loaded machine
# stretches wall time, not CPU time), wall time loosely.
WARM_CPU_SECONDS = 3.0  # on a quiet machine; see _cpu_budget


def _cpu_budget() -> float:
    """WARM_CPU_SECONDS, scaled (up to 2x) while the machine runs more than one task per core, as under
    the parallel suite: a command's own CPU seconds grow then (shared caches, thread pools that spin)."""
    oversubscribed = os.getloadavg()[0] / (os.cpu_count() or 1)
    return WARM_CPU_SECONDS * min(2.0, max(1.0, oversubscribed))


WARM_WALL_SECONDS = 8.0  # on a quiet machine; scaled as the CPU budget is (_wall_budget)


def _wall_budget() -> float:
    """WARM_WALL_SECONDS, scaled (up to 2x) as :func:`_cpu_budget` is: other tasks stretch wall time more."""
    oversubscribed = os.getloadavg()[0] / (os.cpu_count() or 1)
    return WARM_WALL_SECONDS * min(2.0, max(1.0, oversubscribed))


# Reports the modules a command imported, at exit (the command itself exits through SystemExit).
_RUN = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
    "sys.argv = ['agentloom', *sys.argv[1:]]\n"
    "from agentloom.cli import main\n"
    "main()\n"
)


def _run(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """(the finished command, its wall seconds, its CPU seconds: user + sys of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, "-c", _RUN, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert done.returncode == 0, done.stderr
    return done, wall, cpu


def _modules(stderr: str) -> set[str]:
    line = next(line for line in stderr.splitlines() if line.startswith("MODULES "))
    return set(line.split()[1:])


@pytest.mark.slow
def test_a_cold_cache_is_announced_then_a_warm_cli_search_is_fast(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for name, (description, tags) in SEED_SKILLS.items():
        write_skill(root, name, description, tags)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(
        AGENTLOOM_CACHE_DIR=str(tmp_path / "cache"),
        AGENTLOOM_DATA_DIR=str(tmp_path / "data"),
        COLUMNS="250",
        PYTHONUNBUFFERED="1",
    )

    # An empty cache: both models build their cached files, and say so on stderr.
    indexed, _, _ = _run(env, "skills", "index", str(root), "--json")
    assert json.loads(indexed.stdout)["added"] == 4
    announced = [line for line in indexed.stderr.splitlines() if "agentloom.embeddings.firstuse" in line]
    assert any(
        line.startswith("INFO")
        and "building the ONNX graph and tokenizer of multilingual-e5-small (first use" in line
        and str(tmp_path / "cache") in line
        for line in announced
    ), indexed.stderr
    assert any("building the cached copy of use-multilingual-v3 (first use" in line for line in announced), announced
    assert any("built the ONNX graph and tokenizer of multilingual-e5-small in" in line for line in announced)

    first, _, _ = _run(env, "skills", "search", "帮我提交代码", "--json")  # reads the store, writes the warm copy
    expected = json.loads(first.stdout)
    assert expected["results"][0]["name"] == "git-commit" and expected["mode"] == "hybrid"
    assert (tmp_path / "data" / "skills" / warm.FILE).is_file()

    runs = [_run(env, "skills", "search", "帮我提交代码", "--json") for _ in range(3)]
    for done, _, _ in runs:
        assert json.loads(done.stdout) == expected  # the same reply, scores included
        assert "agentloom.embeddings.firstuse:" not in done.stderr  # nothing is built any more
        loaded = _modules(done.stderr)
        assert not {m for m in loaded if m.split(".")[0] in ("lancedb", "pyarrow")}, "the warm copy needs no LanceDB"
    best_wall = min(wall for _, wall, _ in runs)
    best_cpu = min(cpu for _, _, cpu in runs)
    budget = _cpu_budget()
    assert best_cpu <= budget, f"warm CLI search used {best_cpu:.2f} s of CPU (budget {budget:.2f} s)"
    wall_budget = _wall_budget()
    assert best_wall <= wall_budget, f"warm CLI search took {best_wall:.2f} s (budget {wall_budget:.2f} s)"


@pytest.mark.slow
def test_the_warm_copy_answers_as_the_store_does_and_goes_stale_with_it(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root])
    index.scan()
    store = index.path
    queries = ["帮我提交代码", "read a file", "分析Excel文件"]
    expected = [index.search(q) for q in queries]

    fresh = make_index(tmp_path, [seed_root])  # a new process: the store is not open yet
    assert [fresh.search(q) for q in queries] == expected  # read from the store, the copy written
    assert warm.load(store, warm.stamp(store)) is not None
    again = make_index(tmp_path, [seed_root])
    assert [again.search(q) for q in queries] == expected
    assert not again.store.opened  # answered from the copy: LanceDB never opened

    write_skill(seed_root, "deploy", "把服务部署到生产环境", ["deploy"])
    index.scan()  # a write: the stamp changes and the copy no longer serves
    assert warm.load(store, warm.stamp(store)) is None
    later = make_index(tmp_path, [seed_root])
    result = later.search("部署服务到生产")
    assert later.store.opened and names(result)[0] == "deploy"


def test_a_copy_made_by_another_model_is_not_used(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root])
    index.scan()
    make_index(tmp_path, [seed_root]).search("帮我提交代码")  # writes the copy
    vector_only = make_index(tmp_path, [seed_root], rank_model="")
    result = vector_only.search("帮我提交代码")
    assert result["mode"] == "vector" and vector_only.store.opened  # the copy has rank vectors it cannot use
