"""A search in a new process: first-use builds announced, then answered from the warm copy and the cached models."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agentloom.packs.skills import warm
from tests.conftest import PYTHON
from tests.packs.skills.conftest import SEED_SKILLS, make_index, names, write_skill

# Reports the modules a command imported, at exit (the command itself exits through SystemExit).
_RUN = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
    "sys.argv = ['agentloom', *sys.argv[1:]]\n"
    "from agentloom.cli import main\n"
    "main()\n"
)


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [PYTHON, "-c", _RUN, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def _modules(stderr: str) -> set[str]:
    line = next(line for line in stderr.splitlines() if line.startswith("MODULES "))
    return set(line.split()[1:])


@pytest.mark.slow
def test_a_cold_cache_is_announced_then_a_warm_cli_search_builds_nothing_and_needs_no_lancedb(
    tmp_path: Path,
) -> None:
    """What makes a warm search cheap, as behaviour: nothing built, LanceDB and pyarrow not imported,
    the same reply. How long it takes (CPU and wall) is BENCHMARKS.md's "CLI warm"."""
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
    indexed = _run(env, "skills", "index", str(root), "--json")
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

    first = _run(env, "skills", "search", "帮我提交代码", "--json")  # reads the store, writes the warm copy
    expected = json.loads(first.stdout)
    assert expected["results"][0]["name"] == "git-commit" and expected["mode"] == "hybrid"
    assert (tmp_path / "data" / "skills" / warm.FILE).is_file()

    for _ in range(2):
        done = _run(env, "skills", "search", "帮我提交代码", "--json")
        assert json.loads(done.stdout) == expected  # the same reply, scores included
        assert "agentloom.embeddings.firstuse:" not in done.stderr  # nothing is built any more
        loaded = _modules(done.stderr)
        assert not {m for m in loaded if m.split(".")[0] in ("lancedb", "pyarrow")}, "the warm copy needs no LanceDB"


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
    vector_only = make_index(tmp_path, [seed_root], rank_model="", english_model="")
    result = vector_only.search("帮我提交代码")
    assert result["mode"] == "vector" and vector_only.store.opened  # the copy has rank vectors it cannot use
