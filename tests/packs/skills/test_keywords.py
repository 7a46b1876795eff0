"""Keyword matching (keywords.py), the answer when the embedding model fails: exact n-grams and scores."""

from __future__ import annotations

import pytest

from agentloom.packs.skills.keywords import grams, keyword_score


def test_latin_words_are_lowercased_without_stop_words_or_single_letters() -> None:
    # "the", "to", "my" are stop words; "x" is a single letter; "7" is a digit and stays; "go" has two letters.
    assert grams("Commit the Code to GitHub: go 7 x my") == {"commit", "code", "github", "go", "7"}


def test_a_cjk_run_gives_its_characters_and_their_pairs() -> None:
    assert grams("帮我提交") == {"帮", "我", "提", "交", "帮我", "我提", "提交"}
    assert grams("提") == {"提"}  # one character: no pair


def test_every_cjk_block_counts_and_mixed_text_splits_into_runs() -> None:
    # Extension A, compatibility ideographs, kana and Hangul are CJK runs as well.
    assert grams("㐀㐁 豈更 ひら 한국") == {
        "㐀",
        "㐁",
        "㐀㐁",
        "豈",
        "更",
        "豈更",
        "ひ",
        "ら",
        "ひら",
        "한",
        "국",
        "한국",
    }
    assert grams("读取Excel文件") == {"读", "取", "读取", "excel", "文", "件", "文件"}


def test_nothing_to_match() -> None:
    assert grams("") == set()
    assert grams("the a to, I") == set()
    assert keyword_score("the a", "the-a", "the a", ["the"]) == 0.0  # a query of stop words matches nothing


@pytest.mark.parametrize(
    ("query", "name", "description", "tags", "score"),
    [
        ("提交", "x", "提交", [], 1.0),  # all of 提, 交 (1 each) and 提交 (2)
        ("提交", "x", "提", [], 0.25),  # 1 of 4
        ("提交", "x", "提 and 交", [], 0.5),  # both characters, not the pair: 2 of 4
        ("commit 提", "git-commit", "", [], 0.6667),  # a word weighs 2, a character 1: 2 of 3
        ("7 提", "x", "7", [], 0.6667),  # a digit is a word: 2 of 3
        ("deploy", "app", "", ["deploy", "ops"], 1.0),  # the first tag
        ("ops", "app", "", ["deploy", "ops"], 1.0),  # the last tag
        ("commit", "git-commit", "", [], 1.0),  # a word of the name
        ("excel", "x", "读取Excel分析数据", [], 1.0),  # description, case-insensitive
        ("pdf merge tool", "pdf-merge", "", [], 0.6667),  # 2 words of 3
        ("xxcommit gitxx", "git-commit", "", [], 0.0),  # the name's words are its words, nothing glued to them
        ("ab cd", "abXX-XXcd", "", [], 0.0),  # a name splits at its hyphens only: abxx and xxcd, not ab or cd
        ("excel", "x", "", [], 0.0),
    ],
)
def test_keyword_score_is_the_weighted_share_of_query_grams(
    query: str, name: str, description: str, tags: list[str], score: float
) -> None:
    assert keyword_score(query, name, description, tags) == score
