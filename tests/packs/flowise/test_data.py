"""Data management of the flowise pack: real embedded Chroma, the real
embedding model, and every `agentloom flowise data` command (tests/cli_runner.py)."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import time
from itertools import chain
from pathlib import Path

import pytest

from agentloom.core.breakers import BreakerRegistry
from agentloom.core.errors import AgentloomError
from agentloom.core.settings import Settings
from agentloom.core.timestamps import iso
from agentloom.embeddings import EmbeddingService
from agentloom.packs.flowise import data
from agentloom.packs.flowise.catalog import NODES, TEMPLATES
from agentloom.packs.flowise.learning import ARTIFACTS, COLLECTIONS, FAILED, SESSIONS, check_design
from agentloom.packs.flowise.settings import FlowiseSettings
from agentloom.packs.flowise.tools import Flowise
from agentloom.retrieval.columns import column
from tests.cli_runner import agentloom
from tests.conftest import REPO, TIMESTAMP, free_port
from tests.packs.flowise.fake_flowise import FakeFlowise
from tests.packs.flowise.test_catalog import SUBSET, open_flowise, trim

DAY = 86400.0
PACK = REPO / "src" / "agentloom" / "packs" / "flowise"


def run(env: dict[str, str], *args: str, answer: str | None = None) -> subprocess.CompletedProcess[str]:
    """`agentloom flowise data ...` with ``answer`` typed at the prompt (None: stdin closed at once)."""
    return agentloom(env, "flowise", "data", *args, input=answer)


def local_state(data_dir: Path) -> Flowise:
    """The pack's state on ``data_dir`` as the commands build it, with no Flowise server (none is needed)."""
    breakers = BreakerRegistry()
    folder = data_dir / "flowise"
    folder.mkdir(parents=True, exist_ok=True)
    settings = FlowiseSettings(url=f"http://127.0.0.1:{free_port()}")
    return Flowise(settings, folder, breakers, EmbeddingService(Settings(data_dir=data_dir), breakers))


def add(
    state: Flowise, name: str, request: str, days: float, reason: str | None = None, outcome: str = "created"
) -> str:
    """One learning record, ``days`` old."""
    if name == SESSIONS:
        record_id = state.learning.record_session(request, outcome, 1200, 30.0)
    else:
        design = check_design(
            {"nodes": ["chatOpenAI", "bufferMemory", "conversationChain"], "connections": [], "config": {}}
        )
        record_id = state.learning.save(
            request, {"spec": "s", "plan": "p", "tasks": "t"}, design, None, name == ARTIFACTS, reason, {}
        )
    collection = state.learning.collection(name)
    state.chroma.call(lambda: collection.update(ids=[record_id], metadatas=[{"created_at": time.time() - days * DAY}]))
    return record_id


def ids(state: Flowise, name: str) -> set[str]:
    collection = state.learning.collection(name)
    return set(state.chroma.call(lambda: collection.get(include=[]))["ids"])


def counts(env: dict[str, str]) -> dict[str, int]:
    result = run(env, "stats", "--json")
    assert result.returncode == 0, result.stderr
    return {c["collection"]: c["count"] for c in json.loads(result.stdout)["collections"]}


# -- the module ---------------------------------------------------------------------------
def test_parse_age() -> None:
    assert data.parse_age("12h") == 12 * 3600
    assert data.parse_age("30d") == 30 * DAY
    assert data.parse_age(" 2W ") == 14 * DAY
    assert data.parse_age("6m") == 180 * DAY  # months, not minutes
    assert data.parse_age("1.5y") == 1.5 * 365 * DAY
    for bad in ("6", "6x", "m", "", "-3d", "6 months", "0d"):
        with pytest.raises(AgentloomError, match="--older-than"):
            data.parse_age(bad)


@pytest.mark.slow
def test_stats_of_empty_and_seeded_collections(tmp_path: Path) -> None:
    state = local_state(tmp_path)
    empty = data.stats(state)
    assert [row["collection"] for row in empty] == [NODES, TEMPLATES, ARTIFACTS, FAILED, SESSIONS]
    assert all((r["count"], r["bytes"], r["oldest"], r["newest"]) == (0, 0, None, None) for r in empty)

    steps: list[tuple[int, int]] = []
    data.seed(state, nodes=8, templates=3, artifacts=10, progress=lambda d, t, _: steps.append((d, t)), rng_seed=7)
    assert steps[-1] == (21, 21)
    rows = {row["collection"]: row for row in data.stats(state)}
    assert (rows[NODES]["count"], rows[TEMPLATES]["count"], rows[ARTIFACTS]["count"], rows[FAILED]["count"]) == (
        8,
        3,
        8,
        2,
    )
    assert rows[SESSIONS]["count"] >= 10  # one per design, some designs also reused or rejected
    assert rows[NODES]["oldest"] is None and rows[TEMPLATES]["newest"] is None  # the catalog has no dates
    year_ago = time.time() - 366 * DAY
    for name in COLLECTIONS:
        oldest, newest = rows[name]["oldest"], rows[name]["newest"]
        assert oldest is not None and newest is not None
        assert TIMESTAMP.fullmatch(oldest) and TIMESTAMP.fullmatch(newest) and oldest <= newest
        assert oldest > iso(year_ago), "samples are dated over the last year"
    # Size: documents and metadata, plus the vectors: the HNSW folder (allocated even when empty) and those
    # still in Chroma's write-ahead log. Every vector is counted at least once (384 float32 each).
    vectors = data._vector_bytes(state)
    for name, row in rows.items():
        collection = data._open(state, name)
        assert collection is not None
        got = state.chroma.call(functools.partial(collection.get, include=["documents", "metadatas"]))
        documents, metadatas = column(got["documents"], "documents"), column(got["metadatas"], "metadatas")
        content = sum(
            len(d.encode()) + len(json.dumps(m, ensure_ascii=False).encode())
            for d, m in zip(documents, metadatas, strict=True)
        )
        assert row["bytes"] == content + vectors[str(collection.id)]
        assert vectors[str(collection.id)] >= row["count"] * 384 * 4 + 100_000, name
    data.reset(state, SESSIONS)
    after = {row["collection"]: row for row in data.stats(state)}
    assert after[SESSIONS]["count"] == 0 and 0 < after[SESSIONS]["bytes"] < rows[SESSIONS]["bytes"]
    assert after[SESSIONS]["oldest"] is None and after[ARTIFACTS] == rows[ARTIFACTS]


@pytest.mark.slow
def test_samples_are_found_like_real_entries(tmp_path: Path) -> None:
    """Without a catalog, designs use the built-in node names; seeded nodes, templates and designs are found."""
    state = local_state(tmp_path)
    data.seed(state, artifacts=6, rng_seed=3)
    assert state.catalog.state().nodes == {}
    built_in = set(chain(*data.BUILT_IN.values())) | {runner[0] for runner in data.RUNNERS}
    collection = state.learning.collection(ARTIFACTS)
    stored = state.chroma.call(lambda: collection.get(include=["documents", "metadatas"]))
    assert stored["ids"] and all(set(m["nodes"].split(",")) <= built_in for m in stored["metadatas"])
    offered = state.learning.find(stored["documents"][0], {})
    assert stored["ids"][0] in [o["artifact_id"] for o in offered] and offered[0]["similarity"] > 0.99

    data.seed(state, nodes=12, templates=2, rng_seed=3)
    catalog = state.catalog.state()
    assert len(catalog.nodes) == 12 and len(catalog.templates) == 2 and catalog.refreshed_at is not None
    hits = state.catalog.search_nodes("a chat model that writes the answers", "Chat Models", 3)
    assert hits and all(catalog.nodes[h["name"]]["category"] == "Chat Models" for h in hits)
    template = next(iter(catalog.templates.values()))
    assert template.template_id in [t.template_id for t, _ in state.catalog.search_templates(template.description, 2)]


@pytest.mark.slow
def test_seed_uses_the_catalogs_node_names(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    state = open_flowise(trim(fake_flowise), tmp_path)
    state.catalog.refresh()
    refreshed = state.catalog.state().refreshed_at
    data.seed(state, nodes=4, artifacts=8, rng_seed=11)
    catalog = state.catalog.state()
    assert set(catalog.nodes) >= SUBSET and len(catalog.nodes) == len(SUBSET) + 4, "existing names are never replaced"
    assert catalog.refreshed_at == refreshed
    for name in (ARTIFACTS, FAILED):
        collection = state.learning.collection(name)
        got = state.chroma.call(functools.partial(collection.get, include=["metadatas"]))
        for metadata in column(got["metadatas"], "metadatas"):
            assert set(str(metadata["nodes"]).split(",")) <= set(catalog.nodes)
    assert state.catalog.refresh(force=True)["removed"] == 4, "a refresh mirrors Flowise: the sample nodes go"


def test_selections_only_read(tmp_path: Path) -> None:
    state = local_state(tmp_path)
    old_a = add(state, ARTIFACTS, "a bot for HR questions", 400)
    add(state, ARTIFACTS, "a recent bot", 10)
    old_f = add(state, FAILED, "summarise tickets", 300, reason="Timeout while upserting")
    new_f = add(state, FAILED, "pdf timeout questions", 5, reason="credential missing for chatOpenAI")
    old_s = add(state, SESSIONS, "a bot", 250, outcome="reused")
    new_s = add(state, SESSIONS, "a bot", 1, outcome="failed")
    assert {i.id for i in data.older_than(state, 180 * DAY)} == {old_a, old_f, old_s}
    assert {i.id for i in data.older_than(state, 180 * DAY, (FAILED,))} == {old_f}
    assert {i.id for i in data.failed_matching(state, "TIMEOUT")} == {old_f, new_f}  # reason or request, any case
    assert {i.id for i in data.failed_matching(state, r"credential|^summ")} == {old_f, new_f}
    assert {i.id for i in data.failed_matching(state, "upsert")} == {old_f}
    assert {i.id for i in data.failed_matching(state)} == {old_f, new_f}
    assert {i.id for i in data.sessions_matching(state, outcome="failed")} == {new_s}
    assert {i.id for i in data.sessions_matching(state, 30 * DAY)} == {old_s}
    assert data.sessions_matching(state, 30 * DAY, "failed") == []
    preview = next(i.preview for i in data.failed_matching(state, "upsert"))
    assert "\n" not in preview and "Timeout while upserting" in preview and "summarise tickets" in preview
    assert len(ids(state, ARTIFACTS)) == 2 and len(ids(state, FAILED)) == 2 and len(ids(state, SESSIONS)) == 2
    for call, option in (
        (lambda: data.older_than(state, DAY, (NODES,)), "--collection"),
        (lambda: data.failed_matching(state, "time(out"), "--pattern"),
        (lambda: data.sessions_matching(state, outcome="lost"), "--status"),
        (lambda: data.sessions_matching(state), "--older-than"),
    ):
        with pytest.raises(AgentloomError, match=option):
            call()


# -- the commands, in real processes ------------------------------------------------------
@pytest.mark.slow
def test_prune_shows_asks_and_deletes_exactly_the_selection(server_env: dict[str, str]) -> None:
    state = local_state(Path(server_env["AGENTLOOM_DATA_DIR"]))
    old_session = add(state, SESSIONS, "HR bot", 250)
    old = {
        add(state, ARTIFACTS, "HR bot", 400),
        add(state, ARTIFACTS, "sales bot", 200),
        add(state, FAILED, "docs bot", 300, reason="timeout"),
        old_session,
    }
    kept = {
        add(state, ARTIFACTS, "new bot", 10),
        add(state, FAILED, "new docs bot", 5, reason="timeout"),
        add(state, SESSIONS, "new bot", 1),
    }
    every = old | kept

    def stored() -> set[str]:
        return ids(state, ARTIFACTS) | ids(state, FAILED) | ids(state, SESSIONS)

    dry = run(server_env, "prune", "--older-than", "6m", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "4 record(s) older than 6m" in dry.stdout and all(i in dry.stdout for i in old)
    assert not any(i in dry.stdout for i in kept) and "dry run: nothing deleted" in dry.stdout
    assert stored() == every
    refused = run(server_env, "prune", "--older-than", "6m", answer="n\n")
    assert refused.returncode == 1 and "Delete these 4 record(s)? [y/N]" in refused.stdout
    assert "nothing deleted" in refused.stdout and stored() == every
    silent = run(server_env, "prune", "--older-than", "6m")  # no one at the prompt
    assert silent.returncode == 1 and "no answer at the prompt" in silent.stderr and "--yes" in silent.stderr
    assert stored() == every
    only = run(server_env, "prune", "--older-than", "6m", "--collection", SESSIONS, answer="y\n")
    assert only.returncode == 0 and "deleted 1 record(s)" in only.stdout
    assert stored() == every - {old_session}
    done = run(server_env, "prune", "--older-than", "6m", "--yes")
    assert done.returncode == 0 and "deleted 3 record(s)" in done.stdout, done.stdout + done.stderr
    assert stored() == kept
    again = run(server_env, "prune", "--older-than", "6m", "--yes")
    assert again.returncode == 0 and "nothing to delete" in again.stdout

    for bad in ("6x", "0d", "6", "six months"):
        refused_value = run(server_env, "prune", "--older-than", bad, "--yes")
        assert (
            refused_value.returncode == 2 and "--older-than" in refused_value.stderr and "30d" in refused_value.stderr
        )
    missing = run(server_env, "prune", "--yes")
    assert missing.returncode == 2 and "--older-than" in missing.stderr
    wrong = run(server_env, "prune", "--older-than", "1d", "--collection", NODES, "--yes")
    assert wrong.returncode == 2 and "--collection 'nodes'" in wrong.stderr and "refresh" in wrong.stderr
    assert stored() == kept


@pytest.mark.slow
def test_prune_failed_and_sessions_clear(server_env: dict[str, str]) -> None:
    state = local_state(Path(server_env["AGENTLOOM_DATA_DIR"]))
    timeouts = {
        add(state, FAILED, "summarise tickets", 3, reason="Timeout while upserting the vector store"),
        add(state, FAILED, "why does the TIMEOUT bot fail", 4, reason="user said no"),
    }
    other = add(state, FAILED, "pdf bot", 2, reason="credential missing for chatOpenAI")
    reused_old, reused_new = (
        add(state, SESSIONS, "a", 90, outcome="reused"),
        add(state, SESSIONS, "b", 2, outcome="reused"),
    )
    failed_old, created_new = add(state, SESSIONS, "c", 60, outcome="failed"), add(state, SESSIONS, "d", 1)

    bad = run(server_env, "prune-failed", "--pattern", "time(out", "--yes")
    assert bad.returncode == 2 and "--pattern" in bad.stderr and "regular expression" in bad.stderr
    shown = run(server_env, "prune-failed", "--pattern", "timeout", answer="n\n")
    assert shown.returncode == 1 and "2 record(s) of failed designs matching 'timeout'" in shown.stdout
    assert ids(state, FAILED) == timeouts | {other}
    gone = run(server_env, "prune-failed", "--pattern", "timeout", answer="y\n")
    assert gone.returncode == 0 and "deleted 2 record(s)" in gone.stdout and ids(state, FAILED) == {other}

    assert run(server_env, "sessions-clear", "--yes").returncode == 2
    status = run(server_env, "sessions-clear", "--status", "lost", "--yes")
    assert status.returncode == 2 and "--status 'lost'" in status.stderr and "reused" in status.stderr
    age = run(server_env, "sessions-clear", "--older-than", "soon", "--yes")
    assert age.returncode == 2 and "--older-than" in age.stderr
    dry = run(server_env, "sessions-clear", "--status", "reused", "--dry-run")
    assert dry.returncode == 0 and reused_old in dry.stdout and reused_new in dry.stdout
    assert len(ids(state, SESSIONS)) == 4
    both = run(server_env, "sessions-clear", "--older-than", "30d", "--status", "reused", "--yes")
    assert both.returncode == 0 and ids(state, SESSIONS) == {reused_new, failed_old, created_new}
    aged = run(server_env, "sessions-clear", "--older-than", "30d", "--yes")
    assert aged.returncode == 0 and ids(state, SESSIONS) == {reused_new, created_new}
    assert ids(state, FAILED) == {other}


@pytest.mark.slow
def test_stats_seed_and_reset(server_env: dict[str, str]) -> None:
    assert counts(server_env) == dict.fromkeys([NODES, TEMPLATES, ARTIFACTS, FAILED, SESSIONS], 0)
    nothing = run(server_env, "seed")
    assert nothing.returncode == 2 and "--artifacts" in nothing.stderr
    negative = run(server_env, "seed", "--nodes", "-1")
    assert negative.returncode == 2 and "--nodes" in negative.stderr
    seeded = run(server_env, "seed", "--nodes", "6", "--templates", "2", "--artifacts", "5")
    assert seeded.returncode == 0, seeded.stderr
    assert "added 6 node(s), 2 template(s), 5 design(s)" in seeded.stdout
    after = counts(server_env)
    assert (after[NODES], after[TEMPLATES], after[ARTIFACTS] + after[FAILED]) == (6, 2, 5) and after[SESSIONS] >= 5
    table = run(server_env, "stats")
    assert table.returncode == 0 and table.stdout.splitlines()[0].split() == [
        "collection",
        "count",
        "size",
        "oldest",
        "newest",
    ]
    assert TIMESTAMP.search(table.stdout) and " kB" in table.stdout

    wrong = run(server_env, "reset", "--collection", "everything", "--yes")
    assert wrong.returncode == 2 and "--collection 'everything'" in wrong.stderr and "sessions" in wrong.stderr
    dry = run(server_env, "reset", "--collection", SESSIONS, "--dry-run")
    assert (
        dry.returncode == 0 and f"{after[SESSIONS]} record(s) in sessions" in dry.stdout and counts(server_env) == after
    )
    refused = run(server_env, "reset", answer="no\n")
    assert refused.returncode == 1 and counts(server_env) == after
    done = run(server_env, "reset", "--collection", NODES, "--yes")
    assert done.returncode == 0 and counts(server_env) == {**after, NODES: 0}
    catalog = json.loads((Path(server_env["AGENTLOOM_DATA_DIR"]) / "flowise" / "catalog.json").read_text())
    assert catalog["nodes"] == {} and catalog["refreshed_at"] is None and len(catalog["templates"]) == 2
    everything = run(server_env, "reset", "--yes")
    assert everything.returncode == 0 and set(counts(server_env).values()) == {0}


# -- agents read, people delete --------------------------------------------------------------------
async def test_the_stats_tool_is_read_only(tmp_path: Path) -> None:
    from agentloom.packs.flowise.data_tools import flowise_data_stats
    from agentloom.packs.flowise.tools import pack

    state = local_state(tmp_path)
    add(state, ARTIFACTS, "a bot", 3)
    spec = next(t for t in pack.tools if t.name == "flowise_data_stats")
    assert spec.annotations.read_only_hint is True and spec.annotations.destructive_hint is False
    reply = await flowise_data_stats(state)
    assert reply == {"collections": data.stats(state)}
    assert {t.name for t in pack.tools if t.annotations.destructive_hint} <= {"flowise_delete_chatflow"}


def _modules() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACK.rglob("*.py"))}


@pytest.mark.slow
def test_only_the_data_commands_delete_learning_data() -> None:
    """No code path deletes from the pack's ChromaDB except data.py (run by the data commands) and the catalog's
    refresh, which mirrors Flowise's node list in the nodes and templates collections only."""
    modules = _modules()
    deleting = {
        path.name
        for path, tree in modules.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("delete", "delete_collection")
    }
    assert deleting == {"data.py", "catalog.py"}

    # Who may use data.py: the commands (cli_data.py), and the read-only tool (data_tools.py) for stats alone.
    users: dict[str, set[str]] = {}
    for path in (REPO / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "agentloom.packs.flowise.data":
                users.setdefault(path.name, set()).update(a.name for a in node.names)
            elif (
                isinstance(node, ast.ImportFrom)
                and node.module == "agentloom.packs.flowise"
                and any(a.name == "data" for a in node.names)
            ):
                users.setdefault(path.name, set()).add("*")
            elif isinstance(node, ast.Import) and any(a.name == "agentloom.packs.flowise.data" for a in node.names):
                users.setdefault(path.name, set()).add("*")
    assert set(users) == {"cli_data.py", "data_tools.py"} and users["data_tools.py"] == {"stats"}

    # data.py runs nothing on import: definitions only.
    body = modules[PACK / "data.py"].body
    assert all(
        isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign, ast.If))
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        for s in body
    )


def test_the_catalog_deletes_only_from_its_own_collections() -> None:
    assert not {NODES, TEMPLATES} & set(COLLECTIONS)
    tree = _modules()[PACK / "catalog.py"]
    constants = {"NODES": NODES, "TEMPLATES": TEMPLATES}
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}

    # _collection(name, ..., recreate) drops the collection `name` only when recreate is true, and every call
    # that passes recreate names NODES or TEMPLATES.
    opener = functions["_collection"]
    assert opener.args.args[1].arg == "name"
    guards = [node for node in ast.walk(opener) if isinstance(node, ast.If) and ast.unparse(node.test) == "recreate"]
    drops = [
        node
        for guard in guards
        for node in ast.walk(guard)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "delete_collection"
    ]
    assert len(drops) == 1 and ast.unparse(drops[0].args[0]) == "name"
    assert (
        sum(isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "delete_collection" for n in ast.walk(tree)) == 1
    )
    recreating = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "_collection"
        and any(k.arg == "recreate" for k in node.keywords)
    ]
    assert recreating and all(ast.unparse(c.args[0]) in constants for c in recreating)

    # Every record delete goes to a collection variable assigned from self._collection(NODES | TEMPLATES).
    deletes = 0
    for function in functions.values():
        sources = {
            target.id: node.value
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for call in ast.walk(function):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "delete":
                receiver = call.func.value
                assert isinstance(receiver, ast.Name), ast.unparse(call)
                source = sources[receiver.id]
                assert isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute)
                assert source.func.attr == "_collection" and source.args[0].id in constants  # type: ignore[attr-defined]  # an ast.Name here: the call the test looks for
                deletes += 1
    assert deletes >= 2
    assert not any(isinstance(n, ast.Constant) and n.value in COLLECTIONS for n in ast.walk(tree))
