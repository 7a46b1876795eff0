from agentloom.retrieval.lexical import LexicalIndex, reciprocal_rank_fusion

TEXTS = {"a": "The cat purrs on the mat", "b": "Dogs bark at cats", "c": "Bread baking with yeast and flour"}


def test_bm25_ranks_and_restricts() -> None:
    index = LexicalIndex.build(list(TEXTS), list(TEXTS.values()))
    assert len(index) == 3
    assert [i for i, _ in index.search("cats", 3)][:2] == ["a", "b"] or [i for i, _ in index.search("cats", 3)][:2] == [
        "b",
        "a",
    ]
    assert [i for i, _ in index.search("yeast bread", 3)] == ["c"]
    assert [i for i, _ in index.search("cat", 1, allowed={"b"})] == ["b"]  # best among allowed, not global top 1
    assert index.search("the and of", 3) == [] and index.search("", 3) == []
    assert LexicalIndex.build([], []).search("cat", 3) == []


def test_reciprocal_rank_fusion() -> None:
    fused = reciprocal_rank_fusion([["x", "y", "z"], ["y", "w"]])
    assert [i for i, _ in fused] == ["y", "x", "w", "z"]
    assert fused[0][1] == 1 / 62 + 1 / 61
