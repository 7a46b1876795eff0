"""Hybrid search (search.py) on a real LanceDB with both real models: scores stay e5 cosines, USE re-orders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentloom.packs.skills.search import RANK_TABLE
from agentloom.packs.skills.store import SkillIndex
from tests.conftest import REPO
from tests.packs.skills.conftest import SEED_SKILLS, make_index, names, write_skill

E5, USE = "multilingual-e5-small", "use-multilingual-v3"


def scores(result: dict) -> dict[str, float]:
    return {hit["name"]: hit["score"] for hit in result["results"]}


def rank_rows(index: SkillIndex) -> dict[str, str]:
    """id -> SKILL.md hash of the rank model's table."""
    rows = index.store.db().open_table(RANK_TABLE).to_arrow().select(["id", "hash"]).to_pylist()
    return {r["id"]: r["hash"] for r in rows}


def test_seed_commit_request_is_hybrid_and_scored_by_e5(seed_index: SkillIndex) -> None:
    result = seed_index.search("帮我提交代码")
    assert result["mode"] == "hybrid" and result["model"] == E5
    assert names(result)[0] == "git-commit"
    assert scores(result)["git-commit"] > 0.75
    assert {"git-commit", "file-read", "calculate"} >= set(names(result)) - {"excel-analysis"}


def test_seed_excel_request_in_top_three(seed_index: SkillIndex) -> None:
    result = seed_index.search("分析Excel文件", limit=3)
    assert result["mode"] == "hybrid"
    assert "excel-analysis" in names(result)[:3]
    assert scores(result)["excel-analysis"] > 0.7


@pytest.mark.parametrize("query", ["帮我提交代码", "分析Excel文件", "commit my staged changes", "读取这个文件"])
def test_the_rank_model_moves_scores_and_results_stay_sorted_by_them(
    tmp_path: Path, seed_index: SkillIndex, seed_root: Path, query: str
) -> None:
    hybrid = seed_index.search(query, threshold=0)
    alone = make_index(tmp_path / "alone", [seed_root], rank_model="", english_model="")
    alone.scan()
    plain = alone.search(query, threshold=0)
    assert (hybrid["mode"], plain["mode"]) == ("hybrid", "vector")
    for result in (hybrid, plain):
        values = list(scores(result).values())
        assert values == sorted(values, reverse=True) and all(0 < v <= 1 for v in values)
    assert scores(hybrid) != scores(plain)  # the second model's judgement is in the score, not only the order


def test_threshold_applies_to_the_score_and_limit_to_the_count(seed_index: SkillIndex) -> None:
    everything = seed_index.search("帮我提交代码", threshold=0)["results"]
    assert len(everything) == 4
    values = sorted(hit["score"] for hit in everything)
    cut = (values[1] + values[2]) / 2
    kept = seed_index.search("帮我提交代码", threshold=cut)
    assert names(kept) == [h["name"] for h in everything if h["score"] >= cut]
    assert len(seed_index.search("帮我提交代码", limit=1, threshold=0)["results"]) == 1
    default = seed_index.search("帮我提交代码")
    assert default["threshold"] == 0.5 and all(hit["score"] >= 0.5 for hit in default["results"])
    none = seed_index.search("帮我提交代码", threshold=0.9999)
    assert none["results"] == [] and "0.99" in none["message"] and "multilingual-e5-small" in none["message"]


def test_rank_table_follows_rescans(seed_index: SkillIndex, seed_root: Path) -> None:
    assert rank_rows(seed_index) == {n: r["hash"] for n, r in seed_index.rows().items()}
    write_skill(seed_root, "deploy-app", "把应用部署到生产服务器", ["deploy"])
    seed_index.scan()
    assert set(rank_rows(seed_index)) == set(SEED_SKILLS) | {"deploy-app"}
    assert names(seed_index.search("帮我把网站发布上线", threshold=0))[0] == "deploy-app"
    write_skill(seed_root, "file-read", "Read a file from disk and show its text", ["filesystem"])
    shutil.rmtree(seed_root / "calculate")
    seed_index.scan()
    rows = seed_index.rows()
    assert rank_rows(seed_index) == {n: r["hash"] for n, r in rows.items()}
    assert "calculate" not in rank_rows(seed_index)
    result = seed_index.search("帮我算一下这道数学题", threshold=0)
    assert "calculate" not in names(result) and result["mode"] == "hybrid"


def test_removed_skill_leaves_the_rank_table_at_the_next_search(seed_index: SkillIndex) -> None:
    seed_index.remove("calculate")
    result = seed_index.search("帮我算一下这道数学题", threshold=0)
    assert "calculate" not in names(result)
    assert set(rank_rows(seed_index)) == set(SEED_SKILLS) - {"calculate"}


def test_broken_rank_model_falls_back_to_the_scoring_model(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], rank_model="no-such-model", english_model="")
    index.scan()
    result = index.search("帮我提交代码")
    assert result["mode"] == "vector" and names(result)[0] == "git-commit" and result["fallback"] is False


def test_failed_rank_model_shows_in_status_and_is_tried_again_later(tmp_path: Path, seed_root: Path) -> None:
    from agentloom.packs.skills.search import RANK_RETRY_SECONDS

    index = make_index(tmp_path, [seed_root], rank_model="no-such-model", english_model="")
    index.scan()
    assert index.search("帮我提交代码")["mode"] == "vector"
    state = index.status()
    assert state["rank_model"] == "no-such-model" and state["rank_model_state"].startswith("failed (")
    # The model becomes usable (here: the setting now names an installed one); until the retry
    # time has passed the pack keeps ordering by the scoring model alone.
    index.settings.rank_model = "use-multilingual-v3"
    assert index.search("帮我提交代码")["mode"] == "vector"
    index.searcher.sides[0].failed_at -= RANK_RETRY_SECONDS
    assert index.search("帮我提交代码")["mode"] == "hybrid"
    assert index.status()["rank_model_state"].startswith("in use")


def test_rank_model_same_as_scoring_model_is_plain_vector(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], rank_model=E5, english_model="")
    index.scan()
    assert index.search("帮我提交代码")["mode"] == "vector"


@pytest.mark.slow
def test_eval_set_top1_in_both_languages(bench_root: Path, tmp_path: Path) -> None:
    """The issue's goal: top-1 of 85% or more in English and in Chinese (benchmarks/data/skills_eval.json)."""
    index = make_index(tmp_path, [bench_root])
    index.scan()
    evaluation = json.loads((REPO / "benchmarks" / "data" / "skills_eval.json").read_text(encoding="utf-8"))
    for queries in (evaluation["en"], evaluation["zh"]):
        hits = sum(names(index.search(q, limit=1, threshold=0))[:1] == [want] for q, want in queries)
        assert hits / len(queries) >= 0.85, (queries[0][0], hits)


def test_rank_model_of_another_size_makes_its_table_anew(
    tmp_path: Path, seed_index: SkillIndex, seed_root: Path
) -> None:
    assert seed_index.store.db().open_table(RANK_TABLE).schema.field("vector").type.list_size == 512  # USE
    other = make_index(tmp_path, [seed_root], rank_model="all-MiniLM-L6-v2")  # same store, 384-d rank model
    result = other.search("commit my staged changes", threshold=0)
    assert result["mode"] == "hybrid" and names(result)[0] == "git-commit"
    table = other.store.db().open_table(RANK_TABLE)
    assert table.schema.field("vector").type.list_size == 384
    assert {r["id"] for r in table.to_arrow().select(["id"]).to_pylist()} == set(SEED_SKILLS)
