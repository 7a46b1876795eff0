"""scan.py piece by piece: markers, folders, the unchanged rule, counts, progress, messages and removals,
on real folders and a real LanceDB (no stand-ins)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from agentloom.core.errors import NotFoundError
from agentloom.packs.skills.scan import inside, read_marker, skill_folders, write_marker
from agentloom.packs.skills.skillfile import MARKER, file_digest, parse_skill
from agentloom.packs.skills.store import SkillIndex
from agentloom.packs.skills.table import compact_table, ids_in, now_ms
from tests.packs.skills.conftest import SEED_SKILLS, make_index, write_skill

E5 = "multilingual-e5-small"
LOGGER = "agentloom.packs.skills"


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


# -- helpers ----------------------------------------------------------------------------------------
def test_now_ms_is_epoch_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    value = now_ms()
    after = time.time_ns() // 1_000_000
    assert isinstance(value, int) and before <= value <= after


def test_ids_in_quotes_each_name() -> None:
    assert ids_in(["git-commit"]) == "id IN ('git-commit')"
    assert ids_in(["a", "o'neil", "b"]) == "id IN ('a', 'o''neil', 'b')"


def test_compact_table_keeps_one_version_and_warns_nothing(tmp_path: Path) -> None:
    import warnings

    import lancedb
    import pyarrow as pa

    table = lancedb.connect(tmp_path / "db").create_table("t", data=pa.table({"id": ["a"]}))
    for name in ("b", "c", "d"):
        table.add(pa.table({"id": [name]}))
    assert len(table.list_versions()) == 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compact_table(table)
    assert [w for w in caught if issubclass(w.category, UserWarning)] == []
    assert len(table.list_versions()) == 1
    assert sorted(table.to_arrow().column("id").to_pylist()) == ["a", "b", "c", "d"]


def test_markers_round_trip_and_bad_ones_read_as_none(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "calc", "数学计算")
    assert read_marker(folder) is None  # none yet
    skill = parse_skill(folder)
    write_marker(folder, skill, 1_700_000_000_123)
    assert json.loads((folder / MARKER).read_text(encoding="utf-8")) == {
        "indexedAt": 1_700_000_000_123,
        "skillSize": skill.size,
        "skillHash": skill.hash,
    }
    assert read_marker(folder) == {"indexedAt": 1_700_000_000_123, "skillSize": skill.size, "skillHash": skill.hash}
    assert not (folder / f"{MARKER}.tmp").exists()
    (folder / MARKER).write_text("[1, 2]")
    assert read_marker(folder) is None  # JSON, but not an object
    (folder / MARKER).write_text("{not json")
    assert read_marker(folder) is None
    (folder / MARKER).unlink()
    (folder / MARKER).mkdir()
    assert read_marker(folder) is None  # cannot be read


def test_skill_folders(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for name in ("b-skill", "a-skill", ".hidden"):
        write_skill(root, name, "x", folder=name)
    (root / "no-skill-md").mkdir()
    (root / "md-is-a-folder" / "SKILL.md").mkdir(parents=True)
    (root / "file.txt").write_text("x")
    assert list(skill_folders(root)) == [root / "a-skill", root / "b-skill"]
    assert list(skill_folders(root / "a-skill")) == [root / "a-skill"]  # a skill folder itself
    assert list(skill_folders(tmp_path / "missing")) == []
    assert list(skill_folders(root / "file.txt")) == []


def test_inside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    assert inside(root / "a" / "b", root) and inside(root, root)
    assert not inside(tmp_path / "other", root)
    (tmp_path / "link").symlink_to(root / "a")
    assert inside(tmp_path / "link", root)  # resolved first
    assert not inside(root / "a", tmp_path / "link" / "b")


# -- the unchanged rule --------------------------------------------------------------------------------
@pytest.fixture
def plain(tmp_path: Path, seed_root: Path) -> SkillIndex:
    index = make_index(tmp_path, [seed_root], rank_model="", english_model="")
    index.scan()
    return index


def test_unchanged_needs_row_size_hash_path_model_and_marker(plain: SkillIndex, seed_root: Path) -> None:
    scanner, record = plain.scanner, plain.model()
    folder = seed_root / "calculate"
    data = (folder / "SKILL.md").read_bytes()
    size, digest = len(data), file_digest(data)
    row = dict(plain.rows()["calculate"])
    assert scanner._unchanged(folder, row, size, digest, record) is True
    assert scanner._unchanged(folder, None, size, digest, record) is False
    assert scanner._unchanged(folder, {**row, "hash": "0" * 64}, size, digest, record) is False
    assert scanner._unchanged(folder, {**row, "size": size + 1}, size, digest, record) is False
    assert scanner._unchanged(folder, {**row, "path": str(seed_root / "elsewhere")}, size, digest, record) is False
    assert scanner._unchanged(folder, {**row, "model": "another-model"}, size, digest, record) is False
    marker = read_marker(folder)
    assert marker is not None
    (folder / MARKER).write_text(json.dumps({**marker, "skillSize": size + 1}))
    assert scanner._unchanged(folder, row, size, digest, record) is False
    (folder / MARKER).write_text(json.dumps({**marker, "skillHash": "0" * 64}))
    assert scanner._unchanged(folder, row, size, digest, record) is False
    (folder / MARKER).unlink()
    assert scanner._unchanged(folder, row, size, digest, record) is False
    scanner._readonly_told.add(str(seed_root))  # the root was found read-only: the row alone decides
    assert scanner._unchanged(folder, row, size, digest, record) is True
    assert scanner._unchanged(folder, {**row, "size": size + 1}, size, digest, record) is False


def test_check_counts_what_it_skips_word_for_word(
    plain: SkillIndex, tmp_path: Path, seed_root: Path, caplog_debug: pytest.LogCaptureFixture
) -> None:
    scanner, record = plain.scanner, plain.model()
    rows = plain.rows()
    counts: dict = {"added": 0, "updated": 0, "unchanged": 0, "removed": 0, "skipped": []}
    seen: dict[str, Path] = {}
    missing = tmp_path / "gone-skill"
    assert scanner._check(missing, rows, seen, record, counts) is None
    assert counts["skipped"] == [
        {"path": str(missing / "SKILL.md"), "reason": "cannot read: No such file or directory"}
    ]
    assert messages(caplog_debug) == [
        f"skills: skipping {missing / 'SKILL.md'}: cannot read it (No such file or directory)"
    ]
    caplog_debug.clear()
    assert scanner._check(seed_root / "calculate", rows, seen, record, counts) is None
    assert counts["unchanged"] == 1 and seen == {"calculate": seed_root / "calculate"}
    assert messages(caplog_debug) == ["Skipping unchanged skill: calculate"]
    caplog_debug.clear()
    other = write_skill(tmp_path / "other", "calculate", "另一个计算器")
    assert scanner._check(other, rows, seen, record, counts) is None
    reason = f"duplicate name 'calculate': already found at {seed_root / 'calculate'}"
    assert counts["skipped"][-1] == {"path": str(other / "SKILL.md"), "reason": reason}
    assert messages(caplog_debug) == [f"skills: skipping {other / 'SKILL.md'}: {reason}"]
    caplog_debug.clear()
    (tmp_path / "no-front").mkdir()
    (tmp_path / "no-front" / "SKILL.md").write_text("just text\n")
    assert scanner._check(tmp_path / "no-front", rows, seen, record, counts) is None
    problem = "no YAML frontmatter: the file must start with a '---' line"
    assert counts["skipped"][-1] == {"path": str(tmp_path / "no-front" / "SKILL.md"), "reason": problem}
    assert messages(caplog_debug) == [f"skills: skipping {tmp_path / 'no-front' / 'SKILL.md'}: {problem}"]
    new = write_skill(tmp_path / "more", "pdf-merge", "Merge PDF files")
    skill = scanner._check(new, rows, seen, record, counts)
    assert skill is not None and skill.name == "pdf-merge" and seen["pdf-merge"] == new
    assert skill.hash == file_digest((new / "SKILL.md").read_bytes())
    assert (counts["unchanged"], len(counts["skipped"])) == (1, 3)


# -- a whole scan -----------------------------------------------------------------------------------------
def test_scan_counts_rows_markers_progress_and_log(
    tmp_path: Path, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    (seed_root / "no-front").mkdir()
    (seed_root / "no-front" / "SKILL.md").write_text("just text\n")
    index = make_index(tmp_path, [seed_root], rank_model="", english_model="")
    calls: list[tuple[int, int, str]] = []
    before = now_ms()
    result = index.scan(progress=lambda done, total, label: calls.append((done, total, label)))
    skipped = [
        {
            "path": str(seed_root / "no-front" / "SKILL.md"),
            "reason": "no YAML frontmatter: the file must start with a '---' line",
        }
    ]
    seconds = result.pop("seconds")
    assert result == {
        "added": 4,
        "updated": 0,
        "unchanged": 0,
        "removed": 0,
        "skipped": skipped,
        "model": E5,
        "total": 4,
    }
    assert isinstance(seconds, float) and 0 < seconds < 120 and round(seconds, 3) == seconds
    # The skipped folder is done once checked; the batch's last skill (folders sorted) names the batch.
    assert calls == [(1, 5, "checked skill folders"), (5, 5, "5 of 5 skills indexed (last: git-commit)")]
    assert index.scan_progress == (5, 5)
    assert index.last_scan is not None
    last = dict(index.last_scan)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", last.pop("at"))
    assert last == {**result, "seconds": seconds}
    assert f"skills: scan done in {seconds:.2f} s: 4 added, 0 updated, 0 unchanged, 0 removed, 1 skipped" in messages(
        caplog
    )
    rows = index.rows()
    for name, (description, tags) in SEED_SKILLS.items():
        folder = seed_root / name
        data = (folder / "SKILL.md").read_bytes()
        row = rows[name]
        indexed_at = row.pop("indexedAt")
        assert row == {
            "id": name,
            "name": name,
            "description": description,
            "tags": tags,
            "path": str(folder),
            "size": len(data),
            "hash": file_digest(data),
            "model": E5,
        }
        assert before <= indexed_at <= now_ms()
        assert read_marker(folder) == {"indexedAt": indexed_at, "skillSize": len(data), "skillHash": file_digest(data)}

    write_skill(seed_root, "calculate", "数学运算")
    calls.clear()
    again = index.scan(progress=lambda done, total, label: calls.append((done, total, label)))
    assert (again["added"], again["updated"], again["unchanged"], again["removed"]) == (0, 1, 3, 0)
    assert calls == [(4, 5, "checked skill folders"), (5, 5, "5 of 5 skills indexed (last: calculate)")]
    assert index.scan_progress == (5, 5)
    assert (
        f"skills: scan done in {again['seconds']:.2f} s: 0 added, 1 updated, 3 unchanged, 0 removed, 1 skipped"
        in messages(caplog)
    )


@pytest.mark.slow
def test_scan_writes_in_batches_of_32(tmp_path: Path) -> None:
    root = tmp_path / "many"
    for i in range(33):
        write_skill(root, f"s{i:02d}", f"skill number {i}")
    index = make_index(tmp_path, [root], rank_model="", english_model="")
    calls: list[tuple[int, int, str]] = []
    result = index.scan(progress=lambda done, total, label: calls.append((done, total, label)))
    assert (result["added"], result["total"]) == (33, 33)
    assert calls == [
        (0, 33, "checked skill folders"),
        (32, 33, "32 of 33 skills indexed (last: s31)"),
        (33, 33, "33 of 33 skills indexed (last: s32)"),
    ]
    assert sorted(index.rows()) == [f"s{i:02d}" for i in range(33)]
    assert all(read_marker(root / f"s{i:02d}") is not None for i in range(33))


def test_scan_of_a_path_that_is_not_a_folder(plain: SkillIndex, seed_root: Path) -> None:
    for path in (seed_root / "missing", seed_root / "calculate" / "SKILL.md"):
        with pytest.raises(NotFoundError) as caught:
            plain.scan(path)
        assert str(caught.value) == (
            f"path: {path} is not a folder; give a skill folder (with SKILL.md) or a folder of skills."
        )


def test_scanning_one_folder_removes_only_what_is_gone(
    plain: SkillIndex, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    write_skill(seed_root, "calculate", "数学运算")
    result = plain.scan(seed_root / "calculate")  # one skill folder: the others are outside this scan, and kept
    assert (result["added"], result["updated"], result["unchanged"], result["removed"], result["total"]) == (
        0,
        1,
        0,
        0,
        4,
    )
    assert plain.rows()["calculate"]["description"] == "数学运算"
    (seed_root / "git-commit" / "SKILL.md").unlink()  # outside the scanned folder, but its SKILL.md is gone
    (seed_root / "file-read" / "SKILL.md").unlink()
    caplog.clear()
    result = plain.scan(seed_root / "calculate")
    assert (result["unchanged"], result["removed"], result["total"]) == (1, 2, 2)
    assert sorted(plain.rows()) == ["calculate", "excel-analysis"]
    assert "skills: removed 2 skill(s) whose folder is gone: file-read, git-commit" in messages(caplog)
    shutil.rmtree(seed_root / "excel-analysis")
    result = plain.scan()
    assert (result["unchanged"], result["removed"]) == (1, 1) and sorted(plain.rows()) == ["calculate"]


def test_a_folder_whose_marker_cannot_be_written_is_told_once_and_kept_in_the_database(
    tmp_path: Path, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for name in SEED_SKILLS:  # a folder where .vectorized cannot be replaced: the write fails for real
        (seed_root / name / MARKER).mkdir()
    outside = write_skill(tmp_path / "outside", "pdf-merge", "Merge PDF files")
    (outside / MARKER).mkdir()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    index = make_index(tmp_path, [seed_root], rank_model="", english_model="", compact=False)
    assert index.scan()["added"] == 4
    warned = [m for m in messages(caplog) if "cannot write" in m]
    assert warned == [
        f"skills: cannot write .vectorized in {seed_root} (Is a directory): the root is read-only, "
        "index state is kept in the database"
    ]
    again = index.scan()
    assert (again["added"], again["updated"], again["unchanged"]) == (0, 0, 4)
    assert index.scan(outside)["added"] == 1  # outside every root: the folder itself is named
    warned = [m for m in messages(caplog) if "cannot write" in m]
    assert warned[1:] == [
        f"skills: cannot write .vectorized in {outside} (Is a directory): the root is read-only, "
        "index state is kept in the database"
    ]
    assert index.scan(outside)["unchanged"] == 1


def test_scan_without_compaction_keeps_versions(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], rank_model="", english_model="", compact=False)
    index.scan()
    write_skill(seed_root, "calculate", "数学运算")
    index.scan()
    versions = index.table().list_versions()
    assert len(versions) >= 3
    compacting = make_index(tmp_path / "c", [seed_root], rank_model="", english_model="")
    compacting.scan()
    shutil.rmtree(seed_root / "calculate")  # a removal alone compacts too
    compacting.scan()
    assert len(compacting.table().list_versions()) <= 2
    assert os.path.isdir(compacting.path)


def test_progress_while_folders_are_checked_and_after_a_scan_with_nothing_to_embed(
    plain: SkillIndex, seed_root: Path, caplog_debug: pytest.LogCaptureFixture
) -> None:
    (seed_root / "no-front").mkdir()
    (seed_root / "no-front" / "SKILL.md").write_text("just text\n")
    seen: list[tuple[str, tuple[int, int]]] = []

    class Progress(logging.Handler):  # what a search during the scan is told, at each log line of the scan
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.getMessage().split(":")[0], plain.scan_progress))

    handler = Progress()
    logging.getLogger(LOGGER).addHandler(handler)
    try:
        result = plain.scan()
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    assert (result["added"], result["updated"], result["unchanged"], len(result["skipped"])) == (0, 0, 4, 1)
    assert seen == [("Skipping unchanged skill", (0, 5))] * 4 + [("skills", (0, 5)), ("skills", (5, 5))]
    assert plain.scan_progress == (5, 5)  # nothing embedded: the check alone finished the scan
