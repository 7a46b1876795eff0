"""search.py piece by piece: scores, cosines, snippets, the rank model's state, table and fusion, the
background, the glossary, the threshold and the keyword fallback, on a real LanceDB with the real models
(no stand-ins)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from agentloom.core.errors import AgentloomError
from agentloom.embeddings import ModelRecord
from agentloom.embeddings.glossary import glossary
from agentloom.packs.skills import search as search_module
from agentloom.packs.skills.background import LANGUAGE_DIRECTIONS, Background, background, cosines, language
from agentloom.packs.skills.keywords import keyword_score
from agentloom.packs.skills.search import (
    CENTER,
    RANK_RETRY_SECONDS,
    RANK_TABLE,
    SPREAD,
    SkillSearch,
    _hit,
    _matrix,
    _pool,
    _same,
    _scores,
    _side_schema,
)
from agentloom.packs.skills.skillfile import MARKER, embedding_text
from agentloom.packs.skills.store import SkillIndex
from agentloom.packs.skills.table import compact_table
from tests.packs.skills.conftest import SEED_SKILLS, make_index, names, write_skill

E5, USE = "multilingual-e5-small", "use-multilingual-v3"
LOGGER = "agentloom.packs.skills"


def _rank(searcher: SkillSearch) -> ModelRecord:
    """The rank model in use (the test has set one up)."""
    record = searcher.rank_record()
    assert record is not None
    return record


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


# -- pure helpers ---------------------------------------------------------------------------------
def test_scores_are_half_at_the_center_and_rise_with_z() -> None:
    z = np.array([CENTER - 10, CENTER - SPREAD, CENTER, CENTER + SPREAD, CENTER + 10])
    values = _scores(z)
    assert values[2] == 0.5
    assert values[1] == pytest.approx(1 / (1 + np.e)) and values[3] == pytest.approx(1 / (1 + np.exp(-1)))
    assert 0 < values[0] < 1e-6 and 1 - 1e-6 < values[4] < 1
    assert (np.diff(values) > 0).all()


def test_language_is_chinese_from_two_ideographs() -> None:
    assert [language(t) for t in ("帮我提交代码", "commit 代码", "代", "git 提交", "commit my work", "")] == [
        "zh",
        "zh",
        "en",
        "zh",
        "en",
        "en",
    ]


def test_background_removes_the_language_directions() -> None:
    rng = np.random.default_rng(7)
    meaning = rng.normal(size=(40, 16))
    shift = np.zeros(16)
    shift[3] = 2.0  # "Chinese" moves every text along one axis
    bg = Background.from_vectors(meaning, meaning + shift + rng.normal(scale=0.01, size=(40, 16)))
    assert bg.basis.shape == (LANGUAGE_DIRECTIONS, 16)
    assert abs(bg.basis[0][3]) == pytest.approx(1.0, abs=0.01)  # the first direction is the shift
    neutral = bg.neutral(meaning + shift)
    assert np.abs(neutral @ bg.basis.T).max() < 1e-5
    assert np.linalg.norm(neutral, axis=1) == pytest.approx(np.ones(40), abs=1e-5)
    assert bg.texts.shape == (80, 16) and set(bg.by_language) == {"en", "zh"}
    # The same meaning in either language is the same vector once the directions are out.
    assert float((bg.neutral(meaning[0]) * bg.neutral(meaning[0] + shift)).sum()) > 0.999


def test_zscores_are_the_mean_of_the_request_and_skill_normalisations() -> None:
    rng = np.random.default_rng(3)
    bg = Background.from_vectors(rng.normal(size=(30, 8)), rng.normal(size=(30, 8)))
    skills = bg.neutral(rng.normal(size=(5, 8)))
    request = bg.neutral(rng.normal(size=8))
    stats = bg.skill_stats(skills)
    got = bg.zscores(skills, stats, request, "zh")
    cosines = skills @ request
    around = bg.texts @ request
    per_skill = skills @ bg.by_language["zh"].T
    want = 0.5 * ((cosines - around.mean()) / around.std() + (cosines - per_skill.mean(1)) / per_skill.std(1))
    assert got == pytest.approx(want, abs=1e-5)
    assert bg.zscores(skills, stats, request, "en") != pytest.approx(want, abs=1e-3)  # the request's language counts


def test_glossary_translates_the_longest_terms_and_keeps_latin_words() -> None:
    g = glossary()
    assert g.translate("帮我提交代码") == "commit code"
    assert g.translate("帮我做代码评审") == "code review"  # 代码评审 as one term, not 代码 + 评审
    assert g.translate("把这个 PDF 拆分一下") == "PDF split"
    assert g.translate("今天天气怎么样") is None and g.translate("commit my work") is None
    assert g.terms("帮我提交代码") == g.terms("commit the code") == {"提交", "代码"}
    assert g.terms("two commits") == {"提交"}  # a plural finds its entry


def test_cosines_are_row_dot_products() -> None:
    matrix = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, -1.0]], dtype=np.float32)
    assert cosines(matrix, np.array([0.6, 0.8], dtype=np.float32)).tolist() == pytest.approx([0.6, 1.0, -0.8])


def test_matrix_of_a_fixed_size_list_column() -> None:
    column = pa.chunked_array(
        [
            pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32(), 2)),
            pa.array([[5.0, 6.0]], pa.list_(pa.float32(), 2)),
        ]
    )
    matrix = _matrix(column, 3)
    assert matrix.dtype == np.float32 and matrix.tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    one = _matrix(pa.chunked_array([pa.array([[0.5, 0.25, 1.0]], pa.list_(pa.float64(), 3))]), 1)
    assert one.dtype == np.float32 and one.tolist() == [[0.5, 0.25, 1.0]]
    empty = _matrix(pa.chunked_array([], pa.list_(pa.float32(), 2)), 0)
    assert empty.shape == (0, 1) and empty.dtype == np.float32


def test_matrix_reads_a_missing_number_as_nan() -> None:
    # A vector holding a null (written by another tool): read all the same, the null as NaN (a copy, not zero-copy).
    column = pa.chunked_array([pa.array([[1.0, None], [3.0, 4.0]], pa.list_(pa.float32(), 2))])
    matrix = _matrix(column, 2)
    assert matrix.dtype == np.float32 and matrix.shape == (2, 2)
    assert matrix[0, 0] == 1.0 and np.isnan(matrix[0, 1]) and matrix[1].tolist() == [3.0, 4.0]


def test_side_schema() -> None:
    assert _side_schema(7) == pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("hash", pa.string()),
            pa.field("fingerprint", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), 7)),
        ]
    )
    assert not _side_schema(7).field("id").nullable


def test_same_key_means_the_same_table_object_version_and_fingerprint() -> None:
    table, other = object(), object()
    assert _same((table, 3, "fp"), (table, 3, "fp"))
    assert not _same(None, (table, 3, "fp"))
    assert not _same((other, 3, "fp"), (table, 3, "fp"))  # a new table (a model switch): versions start again
    assert not _same(([1], 3, "fp"), ([1], 3, "fp"))  # equal is not enough: the very same object
    assert not _same((table, 4, "fp"), (table, 3, "fp"))
    assert not _same((table, 3, "fp2"), (table, 3, "fp"))
    assert not _same((table, 3, "fp"), (table, 3, "fp2"))
    assert not _same((3, 3, "fp"), (3, 4, "fp"))


def test_hit_snippet_and_path() -> None:
    exact = "a" * 200
    assert _hit("n", exact, 0.5, "/p") == {"name": "n", "description": exact, "score": 0.5, "path": "/p"}
    long = "b" * 198 + " " + "c" * 10
    cut = _hit("n", long, 0.5, None)
    assert cut == {"name": "n", "description": "b" * 198 + "…", "score": 0.5, "path": ""}  # 199 kept, space dropped
    assert _hit("n", "  " + "d" * 250, 0.1, "")["description"] == "  " + "d" * 197 + "…"
    assert len(_hit("n", "e" * 201, 0.1, "")["description"]) == 200


def test_pool_is_one_pool_of_two_named_workers() -> None:
    pool = _pool()
    assert _pool() is pool and search_module._POOL is pool
    assert pool._max_workers == 2
    assert pool.submit(lambda: threading.current_thread().name).result().startswith("skills-rank")


# -- an index ----------------------------------------------------------------------------------------
@pytest.fixture
def plain_index(tmp_path: Path, seed_root: Path) -> SkillIndex:
    """The seed skills scored by e5 alone (no rank model)."""
    index = make_index(tmp_path / "plain", [seed_root], rank_model="", english_model="")
    index.scan()
    return index


def test_snapshot_is_read_once_per_table_version(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], rank_model="", english_model="")
    empty = index.searcher.snapshot()
    assert (empty.names, empty.descriptions, empty.paths, empty.vectors.shape) == ([], [], [], (0, 1))
    index.scan()
    snap = index.searcher.snapshot()
    assert snap is not empty and snap is index.searcher.snapshot()
    assert snap.table is index.table() and snap.version == int(index.table().version)
    rows = index.rows()
    assert sorted(snap.names) == sorted(SEED_SKILLS)
    assert snap.descriptions == [rows[n]["description"] for n in snap.names]
    assert snap.paths == [str(seed_root / n) for n in snap.names]
    service = index.embeddings
    for row, name in enumerate(snap.names):
        description, tags = SEED_SKILLS[name]
        expected = service.embed_documents([embedding_text(name, description, tags)], E5)[0]
        assert np.allclose(snap.vectors[row], expected, atol=1e-5)
    assert snap.vectors.dtype == np.float32 and snap.vectors.shape == (4, 384)
    index.remove("calculate")
    after = index.searcher.snapshot()
    assert after is not snap and "calculate" not in after.names and after.version > snap.version


def test_rank_state_and_record(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], rank_model="", english_model="")
    searcher = index.searcher
    assert searcher.rank_state() == "off" and searcher.rank_record() is None
    index.settings.rank_model = USE
    index.settings.rank_weight = 0.0
    assert searcher.rank_state() == "off" and searcher.rank_record() is None
    index.settings.rank_weight = 1.0
    assert searcher.rank_state() == "in use (weight 1)"
    assert _rank(searcher).key == USE
    index.settings.rank_weight = 0.25
    assert searcher.rank_state() == "in use (weight 0.25)"
    record = _rank(searcher)
    assert record.key == USE and record.dimensions == 512
    index.settings.rank_model = E5  # the scoring model itself: nothing to add
    assert searcher.rank_record() is None and searcher.rank_state() == "in use (weight 0.25)"


def test_unknown_rank_model_gives_up_with_the_reason(
    tmp_path: Path, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    index = make_index(tmp_path, [seed_root], rank_model="no-such-model", english_model="")
    searcher = index.searcher
    before = time.monotonic()
    assert searcher.rank_record() is None
    default = index.embeddings.model(None).key
    reason = f"no embedding model 'no-such-model' in the registry (got {default!r})"
    assert searcher.sides[0].failed == reason and before <= searcher.sides[0].failed_at <= time.monotonic()
    assert searcher.rank_state() == (f"failed ({reason}); results are ordered without it until it works again")
    assert messages(caplog) == [
        f"skills: rank model 'no-such-model' cannot be used ({reason}): results are ordered without it. "
        "Fix: install it, or set rank_model to '' in [pack_settings.skills]."
    ]
    # Not tried again before RANK_RETRY_SECONDS: the setting names a good model now, still nothing.
    index.settings.rank_model = USE
    searcher.sides[0].failed_at = time.monotonic() - RANK_RETRY_SECONDS + 30
    assert searcher.rank_record() is None and searcher.sides[0].failed == reason
    searcher.sides[0].failed_at = time.monotonic() - RANK_RETRY_SECONDS
    assert _rank(searcher).key == USE and searcher.sides[0].failed is None


def test_give_up_rank_keeps_the_first_line_or_the_type(tmp_path: Path, seed_root: Path) -> None:
    searcher = make_index(tmp_path, [seed_root]).searcher
    searcher._give_up(searcher.sides[0], ValueError("first line\nsecond line"))
    assert searcher.sides[0].failed == "first line"
    searcher._give_up(searcher.sides[0], TimeoutError())
    assert searcher.sides[0].failed == "TimeoutError"
    assert searcher.rank_state().startswith("failed (TimeoutError); ")


def test_rank_model_that_cannot_embed_orders_by_the_scoring_model(
    tmp_path: Path, seed_index: SkillIndex, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = seed_index.embeddings.registry
    registry.add_model("broken-rank", "local", dimensions=384, config={"model_path": str(tmp_path / "missing")})
    index = make_index(tmp_path, [seed_root], rank_model="broken-rank", english_model="")  # the same store and registry
    caplog.set_level(logging.WARNING, logger=LOGGER)
    counts = index.scan()
    assert (counts["added"], counts["unchanged"]) == (0, 4)
    assert index.searcher.rank_state().startswith("failed (model_path ")
    result = index.search("帮我提交代码", threshold=0)
    assert result["mode"] == "vector" and len(result["results"]) == 4
    values = [hit["score"] for hit in result["results"]]
    assert values == sorted(values, reverse=True)
    assert sum("skills: rank model 'broken-rank' cannot be used (model_path " in m for m in messages(caplog)) == 1


# -- the rank model's table ------------------------------------------------------------------------
def rank_table(index: SkillIndex) -> dict[str, dict]:
    rows = index.store.db().open_table(RANK_TABLE).to_arrow().to_pylist()
    return {r["id"]: r for r in rows}


def test_sync_writes_each_skill_once_with_hash_fingerprint_and_vector(
    seed_index: SkillIndex, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = seed_index.embeddings.model(USE)
    rows = seed_index.rows()
    table = rank_table(seed_index)
    assert set(table) == set(SEED_SKILLS)
    texts = {n: embedding_text(n, d, t) for n, (d, t) in SEED_SKILLS.items()}
    expected = dict(zip(texts, seed_index.embeddings.embed_documents(list(texts.values()), USE), strict=True))
    for name, row in table.items():
        assert (row["hash"], row["fingerprint"]) == (rows[name]["hash"], record.fingerprint)
        assert np.allclose(row["vector"], expected[name], atol=1e-5)
    # A change, a new skill and a removal: only those are embedded again.
    caplog.set_level(logging.INFO, logger=LOGGER)
    write_skill(seed_root, "calculate", "数学运算和统计", ["math", "stats"])
    write_skill(seed_root, "deploy-app", "把应用部署到生产服务器", ["deploy"])
    import shutil

    shutil.rmtree(seed_root / "file-read")
    seed_index.scan()
    # The scan embedded the two with the rank model too, batch by batch; the sync after it removes the third.
    assert "skills: rank model use-multilingual-v3: 0 embedded, 1 removed" in messages(caplog)
    table = rank_table(seed_index)
    rows = seed_index.rows()
    assert set(table) == {"git-commit", "excel-analysis", "calculate", "deploy-app"}
    assert {n: r["hash"] for n, r in table.items()} == {n: r["hash"] for n, r in rows.items()}
    new = seed_index.embeddings.embed_documents(
        [embedding_text("calculate", "数学运算和统计", ["math", "stats"])], USE
    )[0]
    assert np.allclose(table["calculate"]["vector"], new, atol=1e-5)
    versions = seed_index.store.db().open_table(RANK_TABLE).list_versions()
    assert len(versions) <= 2  # compacted after the change
    caplog.clear()
    seed_index.scan()  # nothing changed: nothing embedded, nothing logged
    assert not [m for m in messages(caplog) if m.startswith("skills: rank model")]


def test_sync_is_skipped_while_the_table_version_is_the_same(seed_index: SkillIndex) -> None:
    rank = seed_index.store.db().open_table(RANK_TABLE)
    rank.delete("id = 'calculate'")  # behind the searcher's back
    seed_index.searcher.sync()  # same skills version, same model: not even read
    assert set(rank_table(seed_index)) == set(SEED_SKILLS) - {"calculate"}
    seed_index.remove("git-commit")  # a new version: brought in step, the deleted row embedded again
    seed_index.searcher.sync()
    assert set(rank_table(seed_index)) == set(SEED_SKILLS) - {"git-commit"}


def test_sync_without_compaction_keeps_versions(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], compact=False)
    index.scan()
    write_skill(seed_root, "calculate", "数学运算")
    index.scan()
    assert len(index.store.db().open_table(RANK_TABLE).list_versions()) >= 3


def test_rank_matrix_follows_the_snapshot_order_with_zeros_for_a_missing_row(seed_index: SkillIndex) -> None:
    searcher = seed_index.searcher
    record = _rank(searcher)
    snap = searcher.snapshot()
    matrix = searcher._side_matrix(searcher.sides[0], snap, record)
    assert matrix is not None
    assert matrix.shape == (4, 512) and matrix.dtype == np.float32
    table = rank_table(seed_index)
    for row, name in enumerate(snap.names):
        assert np.allclose(matrix[row], table[name]["vector"])
    assert searcher._side_matrix(searcher.sides[0], snap, record) is matrix  # cached for this version
    searcher.sides[0].table.delete("id = 'file-read'")
    searcher.sides[0].vectors = None  # forget the copy in memory; the table version of skills is unchanged
    again = searcher._side_matrix(searcher.sides[0], snap, record)
    assert again is not None
    for row, name in enumerate(snap.names):
        if name == "file-read":
            assert not again[row].any()  # no rank vector: zeros, ranked by the scoring model
        else:
            assert np.allclose(again[row], table[name]["vector"])


def test_rank_table_of_another_size_is_made_anew_with_a_warning(
    tmp_path: Path, seed_index: SkillIndex, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    other = make_index(tmp_path, [seed_root], rank_model="all-MiniLM-L6-v2")
    record = _rank(other.searcher)
    other.table()
    table = other.searcher._open_side_table(other.searcher.sides[0], record)
    assert table.schema == _side_schema(384) and table.count_rows() == 0
    assert messages(caplog) == ["skills: rank model is now all-MiniLM-L6-v2 (384-d): its table is made anew"]
    assert other.searcher._open_side_table(other.searcher.sides[0], record) is table


def test_rank_table_is_created_then_opened(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], rank_model="", english_model="")
    index.scan()  # no rank model: no rank table
    assert RANK_TABLE not in set(index.store.db().list_tables().tables)
    index.settings.rank_model = USE
    record = _rank(index.searcher)
    table = index.searcher._open_side_table(index.searcher.sides[0], record)
    assert table.schema == _side_schema(512)
    again = make_index(tmp_path, [seed_root])  # another process: the table exists
    again.table()
    opened = again.searcher._open_side_table(again.searcher.sides[0], record)
    assert opened.schema == _side_schema(512) and opened is not table


def test_after_scan_logs_a_failed_sync(tmp_path: Path, seed_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    index = make_index(tmp_path, [seed_root])
    index.table()
    (index.path / f"{RANK_TABLE}.lance").mkdir()  # a rank table LanceDB cannot open
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert index.scan()["added"] == 4  # the scan itself succeeded
    warned = [m for m in messages(caplog) if m.startswith("skills: side model tables not updated after the scan (")]
    assert len(warned) == 1 and warned[0].endswith("); the next search retries")
    assert "LANCE_SEARCH_ERROR" in warned[0]


# -- ordering ----------------------------------------------------------------------------------------
def test_start_rank_query_embeds_with_the_rank_model(seed_index: SkillIndex, plain_index: SkillIndex) -> None:
    assert plain_index.searcher._start_side_queries(["帮我提交代码"]) == []
    started = seed_index.searcher._start_side_queries(["帮我提交代码", "commit code"])
    assert [(side.role, record.key) for side, record, _ in started] == [("rank", USE), ("english", "all-MiniLM-L6-v2")]
    _, record, future = started[0]
    first, second = future.result()
    assert np.array_equal(first, seed_index.embeddings.embed_query("帮我提交代码", USE))
    assert np.array_equal(second, seed_index.embeddings.embed_query("commit code", USE))


# -- search --------------------------------------------------------------------------------------------
def test_argument_checks_word_for_word(plain_index: SkillIndex) -> None:
    empty = "query: it is empty; describe the task, e.g. 'commit my changes' or '帮我提交代码'."
    for query in ("", "  \n", None, 5):
        with pytest.raises(AgentloomError) as caught:
            plain_index.search(query)  # type: ignore[arg-type]  # a wrong type on purpose: the check under test
        assert str(caught.value) == empty
    for limit in (0, 101, -3):
        with pytest.raises(AgentloomError) as caught:
            plain_index.search("x", limit=limit)
        assert str(caught.value) == f"limit: {limit} is out of range; use 1 to 100."
    for threshold in (-0.01, 1.01, 2.0):
        with pytest.raises(AgentloomError) as caught:
            plain_index.search("x", threshold=threshold)
        assert str(caught.value) == f"threshold: {threshold} is out of range; use a score from 0 to 1 (default 0.5)."
    assert len(plain_index.search("x", limit=1, threshold=0)["results"]) == 1
    assert len(plain_index.search("x", limit=100, threshold=0)["results"]) == 4
    assert plain_index.search("x", threshold=1)["threshold"] == 1
    assert plain_index.search("x", threshold=0)["threshold"] == 0


def expected_scores(index: SkillIndex, query: str) -> dict[str, float]:
    """The scores search.py's docstring describes, for the scoring model alone (which reads the request and, for a
    Chinese one, its glossary translation), computed here from its parts."""
    service = index.embeddings
    record = service.model(E5)
    bg = background(service, record, service.settings.cache_dir)
    texts = {n: embedding_text(n, d, t) for n, (d, t) in SEED_SKILLS.items()}
    skills = bg.neutral(service.embed_documents(list(texts.values()), E5))
    stats = bg.skill_stats(skills)
    z = bg.zscores(skills, stats, bg.neutral(service.embed_query(query, E5)), language(query))
    translation = glossary().translate(query) if language(query) == "zh" else None
    if translation is not None:
        zt = bg.zscores(skills, stats, bg.neutral(service.embed_query(translation, E5)), "en")
        z = (1 - search_module.BLEND) * z + search_module.BLEND * np.maximum(z, zt)
    wanted = glossary().terms(query)
    named = [glossary().terms(f"{n.replace('-', ' ')} {d}") for n, (d, _) in SEED_SKILLS.items()]
    weights = {t: np.log1p(len(named) / (1 + sum(t in terms for terms in named))) for t in wanted}
    share = np.array([sum(weights[t] for t in wanted & terms) / sum(weights.values()) for terms in named])
    values = 1 / (1 + np.exp(-(z + search_module.LEXICAL * share - CENTER) / SPREAD))
    return {n: round(float(v), 4) for n, v in zip(texts, values, strict=True)}


def test_search_reply_is_exact(plain_index: SkillIndex, seed_root: Path) -> None:
    query = "帮我提交代码"
    score = expected_scores(plain_index, query)
    best = sorted(score, key=lambda n: -score[n])
    assert best[0] == "git-commit"
    result = plain_index.search("  " + query + " ", threshold=0)
    expected = [
        {"name": n, "description": SEED_SKILLS[n][0], "score": score[n], "path": str(seed_root / n)} for n in best
    ]
    assert result == {
        "results": expected,
        "message": None,
        "mode": "vector",
        "fallback": False,
        "model": E5,
        "threshold": 0,
    }
    # The threshold keeps a score equal to it, drops the ones under it, and limit counts what passed.
    cut = score[best[1]]
    kept = plain_index.search(query, threshold=cut)
    assert names(kept) == best[:2] and kept["threshold"] == cut
    assert names(plain_index.search(query, limit=1, threshold=cut)) == best[:1]
    assert names(plain_index.search(query, limit=2, threshold=0)) == best[:2]
    assert names(plain_index.search(query, limit=3, threshold=0)) == best[:3]
    # The default threshold is 0.5 unless the settings give one.
    assert plain_index.search(query)["threshold"] == 0.5
    plain_index.settings.threshold = cut
    assert names(plain_index.search(query)) == best[:2] and plain_index.search(query)["threshold"] == cut


def test_an_english_request_is_not_translated_and_terms_count_in_both_languages(plain_index: SkillIndex) -> None:
    for query in ("commit my staged changes", "读取这个文件", "分析Excel文件"):
        result = plain_index.search(query, threshold=0)
        assert {h["name"]: h["score"] for h in result["results"]} == expected_scores(plain_index, query)


def test_nothing_above_the_threshold_and_nothing_indexed(plain_index: SkillIndex, tmp_path: Path) -> None:
    none = plain_index.search("帮我提交代码", threshold=0.99)
    assert none == {
        "results": [],
        "message": "no skill scored 0.99 or more (model multilingual-e5-small); lower threshold or rephrase",
        "mode": "vector",
        "fallback": False,
        "model": E5,
        "threshold": 0.99,
    }
    empty_root = tmp_path / "empty"
    empty_root.mkdir()
    empty = make_index(tmp_path / "empty-index", [empty_root])
    assert empty.search("帮我提交代码") == {
        "results": [],
        "message": "no skills are indexed yet; put skill folders in a root and run skills_index",
        "mode": "vector",
        "fallback": False,
        "model": E5,
        "threshold": 0.5,
    }


def test_a_search_during_a_scan_says_so(plain_index: SkillIndex) -> None:
    plain_index.scanning, plain_index.scan_progress = True, (1, 4)
    progress = "indexing in progress (1 of 4 skill folders done): results come from the skills indexed so far"
    result = plain_index.search("帮我提交代码", threshold=0.99)
    assert result["message"] == f"{progress}; no skill scored 0.99 or more (model {E5}); lower threshold or rephrase"
    assert plain_index.search("帮我提交代码", threshold=0)["message"] == progress


# -- keyword fallback ------------------------------------------------------------------------------------
@pytest.fixture
def broken(tmp_path: Path, seed_index: SkillIndex, seed_root: Path) -> SkillIndex:
    """The seed index read with an embedding model whose files are missing."""
    registry = seed_index.embeddings.registry
    registry.add_model("broken-model", "local", dimensions=384, config={"model_path": str(tmp_path / "no-such-model")})
    return make_index(tmp_path, [seed_root], embedding_model="broken-model", scan_on_start=False)


def test_keyword_fallback_reply_is_exact(broken: SkillIndex, seed_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with pytest.raises(Exception) as failure:
        broken.embeddings.embed_query("x", "broken-model")
    detail = str(failure.value).splitlines()[0]
    query = "读取 git 文件"
    expected = sorted(
        ((keyword_score(query, n, d, t), n) for n, (d, t) in SEED_SKILLS.items() if keyword_score(query, n, d, t) > 0),
        key=lambda item: (-item[0], item[1]),
    )
    assert expected == [(0.8, "file-read"), (0.4, "excel-analysis"), (0.2, "git-commit")]
    result = broken.search(query)
    assert result == {
        "results": [
            {"name": n, "description": SEED_SKILLS[n][0], "score": s, "path": str(seed_root / n)} for s, n in expected
        ],
        "message": f"fallback: the embedding model failed ({detail}); results come from keyword matching on name, "
        "description and tags, and scores are the share of query terms found, not cosine similarities",
        "mode": "keyword",
        "fallback": True,
        "model": None,
        "threshold": None,
    }
    assert names(broken.search(query, limit=2)) == ["file-read", "excel-analysis"]
    assert broken.search("unrelated words only")["results"] == []
    warned = [m for m in messages(caplog) if "answering by keyword matching" in m]
    assert warned == [f"skills: embedding model failed ({failure.value}): answering by keyword matching"]


def test_keyword_fallback_ties_by_name_and_notes(broken: SkillIndex) -> None:
    result = broken.searcher._keyword_search("读取", 5, RuntimeError("first line\nsecond line"))
    # file-read (读取文件) and excel-analysis (读取Excel分析数据) both hold 读取: equal scores, by name.
    assert names(result) == ["excel-analysis", "file-read"]
    assert [h["score"] for h in result["results"]] == [1.0, 1.0]
    assert result["message"].startswith("fallback: the embedding model failed (first line); results come from")
    broken.scanning, broken.scan_progress = True, (2, 4)
    quiet = broken.searcher._keyword_search("读取", 5, TimeoutError())
    assert quiet["message"] == (
        "fallback: the embedding model failed (TimeoutError); results come from keyword matching on name, "
        "description and tags, and scores are the share of query terms found, not cosine similarities; "
        "indexing in progress (2 of 4 skill folders done): results come from the skills indexed so far"
    )


def test_rank_log_names_what_was_embedded(
    seed_index: SkillIndex, seed_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    write_skill(seed_root, "calculate", "数学运算")
    seed_index.scan()  # the scan writes the rank model's row itself: nothing is left for the sync
    assert [m for m in messages(caplog) if m.startswith("skills: rank model")] == [
        "skills: rank model: 1 embedded during the scan"
    ]
    assert rank_table(seed_index)["calculate"]["hash"] == seed_index.rows()["calculate"]["hash"]
    seed_index.searcher.sides[0].table.delete("id = 'calculate'")  # a row lost (another tool, a crash)
    seed_index.searcher.sides[0].synced = None
    seed_index.searcher.sync()
    assert "skills: rank model use-multilingual-v3: 1 embedded, 0 removed" in messages(caplog)
    caplog.clear()
    seed_index.remove("calculate")
    seed_index.searcher.sync()
    assert "skills: rank model use-multilingual-v3: 0 embedded, 1 removed" in messages(caplog)


def test_keyword_fallback_reads_the_tags(broken: SkillIndex) -> None:
    # "versioning" is only a tag of git-commit (its name and description do not hold it).
    assert [(h["name"], h["score"]) for h in broken.search("versioning")["results"]] == [("git-commit", 1.0)]


def test_default_limit_is_five(tmp_path: Path, seed_root: Path) -> None:
    write_skill(seed_root, "pdf-merge", "Merge PDF files")
    write_skill(seed_root, "deploy-app", "Deploy the app")
    index = make_index(tmp_path, [seed_root], rank_model="", english_model="")
    index.scan()
    assert len(index.search("帮我提交代码", threshold=0)["results"]) == 5
    assert len(index.search("帮我提交代码", limit=6, threshold=0)["results"]) == 6
    assert len(index.searcher.search("帮我提交代码", threshold=0)["results"]) == 5  # the searcher's own default


def test_a_forked_child_gets_its_own_pool() -> None:
    """The parent's pool threads do not exist in a forked child: a query handed to that pool would wait forever."""
    import os

    assert _pool().submit(lambda: 1).result() == 1  # the parent's pool is up
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports by its exit code
        ok = search_module._POOL is None and _pool().submit(lambda: 2).result(timeout=10) == 2
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# -- rows another writer put in the table ----------------------------------------------------------------
def stored_row(name: str, description: str | None, vector: list[float] | None = None, path: str | None = None) -> dict:
    """A ``skills`` row as LanceDB holds it; ``path`` None: no metadata at all."""
    meta = None if path is None else {"path": path, "size": 1, "hash": "h", "indexedAt": 1, "model": E5}
    return {
        "id": name,
        "name": name,
        "description": description,
        "tags": [],
        "vector": vector if vector is not None else [1.0] + [0.0] * 383,
        "metadata": meta,
    }


def test_snapshot_reads_the_latest_version_when_a_compaction_removed_its_own(tmp_path: Path) -> None:
    import lancedb

    index = make_index(tmp_path, [tmp_path / "skills"], rank_model="", english_model="")
    table = index.table()
    table.add(
        pa.Table.from_pylist(
            [stored_row("a", "A", path="/s/a"), stored_row("b", "B", path="/s/b")], schema=table.schema
        )
    )
    seen = int(table.version)
    # Our table object still reads this version (as it does for up to 1 s after another process writes):
    # pinned here, so the test does not depend on timing.
    table.checkout(seen)
    other = lancedb.connect(index.path).open_table("skills")
    other.add(pa.Table.from_pylist([stored_row("c", "C", path="/s/c")], schema=other.schema))
    compact_table(other)  # the other process compacts: the files of the version we read are gone
    with pytest.raises(Exception, match="Not found"):
        table.to_arrow()
    snap = index.searcher.snapshot()
    assert snap.version == int(other.version) > seen and snap.version == int(table.version)
    assert snap.table is table
    assert sorted(zip(snap.names, snap.descriptions, snap.paths, strict=True)) == [
        ("a", "A", "/s/a"),
        ("b", "B", "/s/b"),
        ("c", "C", "/s/c"),
    ]
    assert snap.vectors.shape == (3, 384)
    assert index.searcher.snapshot() is snap  # read once for this version


def test_a_stored_row_without_description_or_metadata_reads_as_empty_text(tmp_path: Path) -> None:
    index = make_index(tmp_path, [tmp_path / "skills"], rank_model="", english_model="")
    table = index.table()
    table.add(
        pa.Table.from_pylist(
            [
                stored_row("deploy-app", None),
                stored_row("pdf-merge", "", path="/s/pdf-merge"),
                stored_row("git-commit", "Commit changes", path="/s/git-commit"),
            ],
            schema=table.schema,
        )
    )
    snap = index.searcher.snapshot()
    assert sorted(zip(snap.names, snap.descriptions, snap.paths, strict=True)) == [
        ("deploy-app", "", ""),
        ("git-commit", "Commit changes", "/s/git-commit"),
        ("pdf-merge", "", "/s/pdf-merge"),
    ]
    # The keyword fallback reads the same rows: no description matches nothing and shows as "".
    fallback = index.searcher._keyword_search("deploy pdf", 5, RuntimeError("down"))
    assert fallback["results"] == [
        {"name": "deploy-app", "description": "", "score": 0.5, "path": ""},
        {"name": "pdf-merge", "description": "", "score": 0.5, "path": "/s/pdf-merge"},
    ]
    assert index.searcher._keyword_search("xxxx", 5, RuntimeError("down"))["results"] == []


def test_a_stored_vector_with_a_null_scores_nothing(plain_index: SkillIndex, seed_root: Path) -> None:
    """A vector another tool wrote with a null in it: its cosine is NaN, which no threshold keeps (NaN is not JSON)."""
    query = "帮我提交代码"
    q = plain_index.embeddings.embed_query(query, E5).tolist()
    table = plain_index.table()
    table.delete("id = 'calculate'")
    table.add(
        pa.Table.from_pylist(
            [stored_row("calculate", "数学计算", [None, *q[1:]], path=str(seed_root / "calculate"))],  # type: ignore[list-item]  # a null in a vector on purpose, as another tool may write
            schema=table.schema,
        )
    )
    for threshold in (0, 0.99):
        names = [hit["name"] for hit in plain_index.search(query, threshold=threshold)["results"]]
        assert "calculate" not in names
    assert len(plain_index.search(query, threshold=0)["results"]) == 3


def test_sync_embeds_a_row_without_description_as_empty_text(tmp_path: Path) -> None:
    index = make_index(tmp_path, [tmp_path / "skills"])  # the rank model on (USE)
    table = index.table()
    table.add(
        pa.Table.from_pylist(
            [stored_row("deploy-app", None), stored_row("pdf-merge", "", path="/s/pdf-merge")], schema=table.schema
        )
    )
    index.searcher.sync()
    stored = rank_table(index)
    expected = index.embeddings.embed_documents(
        [embedding_text("deploy-app", "", []), embedding_text("pdf-merge", "", [])], USE
    )
    assert sorted(stored) == ["deploy-app", "pdf-merge"]
    assert np.allclose(stored["deploy-app"]["vector"], expected[0], atol=1e-5)
    assert np.allclose(stored["pdf-merge"]["vector"], expected[1], atol=1e-5)
    assert stored["deploy-app"]["hash"] is None and stored["pdf-merge"]["hash"] == "h"


@pytest.mark.slow
def test_the_scan_writes_side_rows_in_its_batches_and_the_sync_in_batches_of_64(
    tmp_path: Path, seed_root: Path
) -> None:
    index = make_index(tmp_path, [seed_root], compact=False)
    index.scan()
    rank = index.store.db().open_table(RANK_TABLE)
    assert len(rank.list_versions()) == 2  # made, then the 4 skills in the scan's one batch
    for i in range(65):
        write_skill(seed_root, f"s{i:02d}", f"skill number {i}")
    index.scan()
    rank.checkout_latest()
    assert len(rank.list_versions()) == 5  # 65 new skills: the scan's batches of 32, 32 and 1
    side = index.searcher.sides[0]
    side.table.delete("id IS NOT NULL")  # every row lost (another tool, a crash)
    side.synced = None
    index.searcher.sync()
    rank.checkout_latest()
    assert len(rank.list_versions()) == 8  # the delete, then the sync's merges of 64 and 5
    assert set(rank_table(index)) == set(SEED_SKILLS) | {f"s{i:02d}" for i in range(65)}


def test_sync_compacts_after_embedding_alone_and_after_removing_alone(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root])  # compaction on
    index.scan()  # 4 embedded, none removed
    rank = index.store.db().open_table(RANK_TABLE)
    assert len(rank.list_versions()) == 1
    index.remove("calculate")  # none embedded, 1 removed
    index.searcher.sync()
    rank.checkout_latest()
    assert len(rank.list_versions()) == 1 and set(rank_table(index)) == set(SEED_SKILLS) - {"calculate"}


def test_sync_with_nothing_to_write_does_not_compact(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], compact=False)
    index.scan()
    rank = index.store.db().open_table(RANK_TABLE)
    assert len(rank.list_versions()) == 2
    index.settings.compact = True
    (
        seed_root / "calculate" / MARKER
    ).unlink()  # written again with the same bytes: a new skills version, same rank row
    assert index.scan()["updated"] == 1
    rank.checkout_latest()
    assert len(rank.list_versions()) == 2  # nothing embedded or removed: the rank table is left as it is


def test_a_forked_child_gets_a_query_pool_and_lock_of_its_own() -> None:
    """What os.register_at_fork runs in a child: the parent's pool threads do not exist there, and a lock one of
    them held when the parent forked would stay held forever."""
    from concurrent.futures import ThreadPoolExecutor

    inherited = _pool()
    held = search_module._POOL_LOCK
    held.acquire()  # as a thread of the parent might hold it at the fork
    try:
        search_module._forget_pool()
        with ThreadPoolExecutor(1) as probe:
            fresh = probe.submit(_pool).result(timeout=10)
        assert fresh is not inherited
        assert fresh.submit(lambda: 42).result(timeout=10) == 42
        assert _pool() is fresh, "made once, then kept"
    finally:
        held.release()
        inherited.shutdown(wait=False)


def test_the_rank_model_on_a_clock_started_seconds_ago(
    tmp_path: Path, seed_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The monotonic clock counts from boot: a machine (a microVM, a new container host) up for seconds uses the
    rank model at once, and one that failed is tried again after exactly RANK_RETRY_SECONDS."""
    import types

    clock = [10.0]
    monkeypatch.setattr(search_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    index = make_index(tmp_path, [seed_root], rank_model=USE, rank_weight=1.0)
    searcher = index.searcher
    assert searcher.rank_state() == "in use (weight 1)"
    assert _rank(searcher).key == USE
    index.settings.rank_model = "no-such-model"
    assert searcher.rank_record() is None and searcher.sides[0].failed_at == 10.0
    index.settings.rank_model = USE
    clock[0] = 10.0 + RANK_RETRY_SECONDS - 0.5
    assert searcher.rank_record() is None
    clock[0] = 10.0 + RANK_RETRY_SECONDS
    assert _rank(searcher).key == USE, "tried again once RANK_RETRY_SECONDS have passed"


def test_a_registry_that_cannot_be_read_names_its_error_as_the_reason(tmp_path: Path, seed_root: Path) -> None:
    index = make_index(tmp_path, [seed_root], rank_model=USE, rank_weight=1.0)
    registry = index.embeddings.registry.path
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_bytes(b"not a database" * 100)
    assert index.searcher.rank_record() is None
    assert index.searcher.rank_state().startswith("failed (file is not a database); "), index.searcher.rank_state()


def test_mixed_scores_use_the_language_shares_and_rescale_over_the_models_that_answered(
    tmp_path: Path, seed_root: Path
) -> None:
    index = make_index(tmp_path, [seed_root])
    searcher = index.searcher
    z = {"scoring": np.array([1.0, 0.0]), "rank": np.array([0.0, 1.0]), "english": np.array([2.0, 2.0])}
    en, zh = search_module.shares()["en"], search_module.shares()["zh"]
    assert abs(sum(en.values()) - 1) < 1e-9 and abs(sum(zh.values()) - 1) < 1e-9
    expected = sum(en[role] * values for role, values in z.items())
    assert np.allclose(searcher._mixed(z, "en"), expected)
    assert np.allclose(searcher._mixed(z, "zh"), sum(zh[role] * values for role, values in z.items()))
    assert np.allclose(searcher._mixed(z, "fr"), expected)  # a language without shares reads as English
    two = {"scoring": z["scoring"], "rank": z["rank"]}  # the English model is off or failed: its share is spread
    total = en["scoring"] + en["rank"]
    assert np.allclose(searcher._mixed(two, "en"), (en["scoring"] * z["scoring"] + en["rank"] * z["rank"]) / total)
    index.settings.rank_weight = 0.25  # a fixed rank share; the others keep their proportions in the rest
    others = en["scoring"] + en["english"]
    fixed = 0.25 * z["rank"] + 0.75 * (en["scoring"] * z["scoring"] + en["english"] * z["english"]) / others
    assert np.allclose(searcher._mixed(z, "en"), fixed)
