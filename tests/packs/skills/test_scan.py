"""The scan's fast path (scan.py): unchanged skills are skipped without a YAML parse, and every
change still shows: content alone (same size), size, a deleted folder, a move, YAML errors, duplicates."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import agentloom.packs.skills.scan as scan
from agentloom.packs.skills.skillfile import MARKER, Skill
from agentloom.packs.skills.store import SkillIndex
from tests.packs.skills.conftest import make_index, write_skill

BROKEN_YAML = "---\nname: broken-yaml\ndescription: [not closed\n---\n\nBody.\n"


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folder names the scan parses (the real parser still runs)."""
    names: list[str] = []
    real = scan.parse_skill

    def spy(folder: Path, *args: object) -> Skill:
        names.append(folder.name)
        return real(folder, *args)  # type: ignore[arg-type]  # the wrapped function takes what it was given

    monkeypatch.setattr(scan, "parse_skill", spy)
    return names


def counts(result: dict) -> tuple[int, int, int, int]:
    return result["added"], result["updated"], result["unchanged"], result["removed"]


def test_unchanged_skills_are_not_parsed(seed_index: SkillIndex, parsed: list[str]) -> None:
    assert counts(seed_index.scan()) == (0, 0, 4, 0)
    assert parsed == []


def test_same_size_content_change_is_reindexed(seed_index: SkillIndex, seed_root: Path, parsed: list[str]) -> None:
    skill_md = seed_root / "calculate" / "SKILL.md"
    before = skill_md.stat().st_size
    write_skill(seed_root, "calculate", "数学运算")  # 算 -> 运: same UTF-8 length, other bytes
    assert skill_md.stat().st_size == before
    assert counts(seed_index.scan()) == (0, 1, 3, 0)
    assert parsed == ["calculate"]
    assert seed_index.rows()["calculate"]["description"] == "数学运算"


def test_size_change_is_reindexed(seed_index: SkillIndex, seed_root: Path, parsed: list[str]) -> None:
    write_skill(seed_root, "file-read", "读取文件并显示内容", ["filesystem"])
    assert counts(seed_index.scan()) == (0, 1, 3, 0)
    assert parsed == ["file-read"]
    assert seed_index.rows()["file-read"]["size"] == (seed_root / "file-read" / "SKILL.md").stat().st_size


def test_deleted_folder_is_removed(seed_index: SkillIndex, seed_root: Path, parsed: list[str]) -> None:
    shutil.rmtree(seed_root / "excel-analysis")
    assert counts(seed_index.scan()) == (0, 0, 3, 1)
    assert parsed == [] and "excel-analysis" not in seed_index.rows()


def test_yaml_errors_are_reported_on_every_scan(seed_index: SkillIndex, seed_root: Path) -> None:
    (seed_root / "broken-yaml").mkdir()
    (seed_root / "broken-yaml" / "SKILL.md").write_text(BROKEN_YAML, encoding="utf-8")
    (seed_root / "git-commit" / "SKILL.md").write_text(
        BROKEN_YAML.replace("broken-yaml", "git-commit"), encoding="utf-8"
    )
    for _ in range(2):  # a broken file is never taken for unchanged
        result = seed_index.scan()
        reasons = {Path(s["path"]).parent.name: s["reason"] for s in result["skipped"]}
        assert set(reasons) == {"broken-yaml", "git-commit"}
        assert all("not valid YAML" in r for r in reasons.values())
        assert result["unchanged"] == 3
    assert "git-commit" not in seed_index.rows()  # the last valid version is not served as current


def test_missing_marker_is_reindexed(seed_index: SkillIndex, seed_root: Path, parsed: list[str]) -> None:
    (seed_root / "calculate" / MARKER).unlink()
    assert counts(seed_index.scan()) == (0, 1, 3, 0)
    assert parsed == ["calculate"]


def test_a_folder_moved_to_another_root_is_reindexed(tmp_path: Path, seed_root: Path, parsed: list[str]) -> None:
    other = tmp_path / "other"
    other.mkdir()
    index = make_index(tmp_path, [seed_root, other])
    index.scan()
    parsed.clear()
    shutil.move(seed_root / "calculate", other / "calculate")  # same bytes, same marker, other path
    assert counts(index.scan()) == (0, 1, 3, 0)
    assert parsed == ["calculate"]
    assert index.rows()["calculate"]["path"] == str(other / "calculate")


def test_a_duplicate_name_stays_skipped(tmp_path: Path, seed_root: Path) -> None:
    other = tmp_path / "other"
    write_skill(other, "calculate", "另一个计算器")
    index = make_index(tmp_path, [seed_root, other])
    for _ in range(2):
        result = index.scan()
        assert [Path(s["path"]).parent for s in result["skipped"]] == [other / "calculate"]
        assert "duplicate name 'calculate'" in result["skipped"][0]["reason"]
    assert result["unchanged"] == 4
    assert index.rows()["calculate"]["path"] == str(seed_root / "calculate")


def test_a_new_duplicate_in_an_earlier_root_wins(tmp_path: Path, seed_root: Path) -> None:
    other = tmp_path / "other"
    write_skill(other, "pdf-merge", "Merge PDF files")
    index = make_index(tmp_path, [seed_root, other])
    assert index.scan()["added"] == 5
    write_skill(seed_root, "pdf-merge", "Merge several PDF files into one")
    # other/pdf-merge still matches its row and marker, but the name is taken by the earlier root now.
    result = index.scan()
    assert counts(result) == (0, 1, 4, 0)
    assert [Path(s["path"]).parent for s in result["skipped"]] == [other / "pdf-merge"]
    assert index.rows()["pdf-merge"]["path"] == str(seed_root / "pdf-merge")


def test_an_edit_between_the_read_and_the_parse_stores_what_was_hashed(
    seed_index: SkillIndex, seed_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan parses the bytes it hashed: a file saved again meanwhile is not stored under the old digest
    (the next scan would take it for unchanged), it is found changed by the next scan."""
    real = scan.parse_skill
    write_skill(seed_root, "calculate", "数学计算器")

    def saved_meanwhile(folder: Path, *args: object) -> Skill:
        write_skill(seed_root, folder.name, "edited while the scan ran")
        return real(folder, *args)  # type: ignore[arg-type]  # the wrapped function takes what it was given

    monkeypatch.setattr(scan, "parse_skill", saved_meanwhile)
    assert counts(seed_index.scan()) == (0, 1, 3, 0)
    assert seed_index.rows()["calculate"]["description"] == "数学计算器", "what was read and hashed"
    monkeypatch.undo()
    assert counts(seed_index.scan()) == (0, 1, 3, 0)
    assert seed_index.rows()["calculate"]["description"] == "edited while the scan ran"
