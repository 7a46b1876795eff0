"""The chunker, with the real all-MiniLM-L6-v2 tokenizer: invariants, boundaries, limits."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from agentloom.core.errors import AgentloomError, ConfigError
from agentloom.embeddings.bert.build import MINILM_TOKENIZER
from agentloom.packs.vectors.chunking import Chunk, chunk_text
from tests.conftest import examples

TOKENIZER_FILE = str(MINILM_TOKENIZER)
TOKENIZER = Tokenizer.from_file(TOKENIZER_FILE)
TOKENIZER.no_truncation()  # the file truncates and pads to 128 by default
TOKENIZER.no_padding()


def chunks(
    text: str, size: int = 40, overlap: int = 8, max_tokens: int = 256, tokenizer: Tokenizer | None = TOKENIZER
) -> list[Chunk]:
    return chunk_text(text, tokenizer=tokenizer, chunk_tokens=size, overlap_tokens=overlap, max_tokens=max_tokens)


def real_tokens(text: str) -> int:
    return len(TOKENIZER.encode(text, add_special_tokens=False).ids)


def check_invariants(text: str, result: list[Chunk], size: int, max_tokens: int = 256, exact: bool = True) -> None:
    """Offsets exact, indices consecutive, no blank chunk, every non-space character covered,
    and (re-encoded alone, as the embedder will) no chunk over chunk_size or max_tokens - 2."""
    assert [c.index for c in result] == list(range(len(result)))
    covered = [0] * (len(text) + 1)
    for c in result:
        assert 0 <= c.start < c.end <= len(text)
        assert text[c.start : c.end] == c.text
        assert c.text == c.text.strip() and c.text
        real = real_tokens(c.text)
        assert real <= size <= max_tokens - 2, (real, c)
        if exact:
            assert c.tokens == real, (c.tokens, real, c.text[:60])
        covered[c.start] += 1
        covered[c.end] -= 1
    depth = 0
    for i, ch in enumerate(text):
        depth += covered[i]
        assert depth > 0 or ch.isspace(), f"character {i} ({ch!r}) is in no chunk"
    assert [c.start for c in result] == sorted(c.start for c in result)


PIECES = [
    "word ", "Hello", " the ", "naïve ", "unbelievably ", "Café", ". ", "! ", "? ", ".", "\n", "\n\n", "\t", " ",
    "猫", "好き", "。", "！", "🙂", "👩\u200d💻", "\u200b", "\x00", "\u0301", "x" * 150, "ﬁ", "ｆｕｌｌ", "”", "\u3000",
    "supercalifragilisticexpialidocious", "3.14", "(a)", "##", "[UNK]", "\u2028",
]


@settings(max_examples=examples(60), deadline=None)
@given(
    st.one_of(
        st.lists(st.sampled_from(PIECES), max_size=250).map("".join),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=400),
    ),
    st.integers(16, 64),
    st.data(),
)
def test_invariants_hold_for_any_text(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size - 1), label="overlap")
    max_tokens = data.draw(st.integers(size + 2, size + 40), label="max_tokens")
    check_invariants(text, chunks(text, size, overlap, max_tokens), size, max_tokens)


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.text("abcdefghij.", min_size=1, max_size=30), max_size=120).map(" ".join), st.integers(16, 60))
def test_without_a_tokenizer_a_token_is_four_characters_of_a_word(text: str, size: int) -> None:
    result = chunks(text, size, size // 4, max_tokens=8192, tokenizer=None)
    for c in result:
        assert text[c.start : c.end] == c.text
        assert c.tokens == sum(math.ceil(len(w) / 4) for w in c.text.split()) <= size
    assert set(range(len(text))) - {i for c in result for i in range(c.start, c.end)} <= {
        i for i, ch in enumerate(text) if ch.isspace()
    }


@pytest.mark.parametrize(
    "text",
    [
        "x" * 5000,  # one word, no spaces
        "猫が好きです" * 800,  # CJK, no spaces and no sentence ends
        "\n" * 500 + "end",
        "🙂" * 1000,
        "a." * 3000,
        "ab" * 45 + " " + "qwertyuiopasdfghjklzxcvbnm" * 3,  # long words split into many word pieces
        "antidisestablishmentarianism" * 40,
        "\u200b\x00\u200b",  # only characters the tokenizer drops
        "x" * 70_000,  # longer than one tokenizer segment, no whitespace
    ],
)
@pytest.mark.parametrize(("size", "overlap", "max_tokens"), [(200, 30, 256), (16, 15, 18), (40, 0, 512)])
def test_pathological_input_never_exceeds_the_limit(text: str, size: int, overlap: int, max_tokens: int) -> None:
    result = chunks(text, size, overlap, max_tokens)
    assert result
    check_invariants(text, result, size, max_tokens)


def test_long_word_pieces_are_split_and_recounted_alone() -> None:
    # 90 letters: 40-odd word pieces in one word, cut mid-word many times at 16 tokens
    text = "qzxjvkwpfm" * 9
    result = chunks(text, size=16, overlap=4, max_tokens=18)
    assert len(result) > 2
    check_invariants(text, result, 16, 18)


def test_blank_and_empty_texts_give_no_chunks() -> None:
    for text in ["", " ", "\n\n\t ", "\u3000\u2028"]:
        assert chunks(text) == []
        assert chunks(text, tokenizer=None, max_tokens=8192) == []


def test_prefers_paragraphs_then_sentences() -> None:
    para = " ".join(f"Sentence {i} ends here." for i in range(5))  # 25 tokens
    text = f"{para}\n\n{para}\n\n{para}"
    result = chunks(text, size=40, overlap=0)
    assert [c.text for c in result] == [para, para, para]
    # no paragraph within reach: the chunk ends at a sentence, never mid-sentence
    long_para = " ".join(f"Sentence {i} ends here." for i in range(40))
    for c in chunks(long_para, size=40, overlap=0):
        assert c.text.startswith("Sentence") and c.text.endswith("here.")
        assert c.tokens >= 20  # at least half full
    # a short heading is not a chunk of its own: chunks are at least half full
    first = chunks(f"Introduction\n\n{long_para}", size=40, overlap=0)[0]
    assert first.text.startswith("Introduction\n\nSentence 0") and first.tokens >= 20


def test_sentence_ends_in_cjk_and_with_closing_quotes() -> None:
    cjk = "我喜欢猫。" * 30  # 5 tokens a sentence, no spaces
    for c in chunks(cjk, size=32, overlap=0):
        assert c.text.endswith("。") and c.tokens <= 32
    quoted = " ".join(f'He said "number {i} is fine." Then' for i in range(20))
    for c in chunks(quoted, size=30, overlap=0)[:-1]:
        assert c.text.endswith('fine."')


def test_prefers_line_breaks_to_spaces() -> None:
    text = "\n".join(f"- item number {i} of the list" for i in range(40))
    for c in chunks(text, size=40, overlap=0):
        assert c.text.startswith("- item") and c.text.endswith("of the list")


def test_overlap_is_about_the_requested_size_and_starts_a_sentence() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(60))  # 7 tokens a sentence
    result = chunks(text, size=60, overlap=15)
    assert len(result) > 3
    for a, b in itertools.pairwise(result):
        assert a.start < b.start < a.end
        shared = real_tokens(text[b.start : a.end])
        assert 7 <= shared <= 15
        assert b.text.startswith("Sentence")
    check_invariants(text, result, 60)


def test_no_overlap_means_disjoint_chunks() -> None:
    text = " ".join(f"word{i}" for i in range(2000))
    result = chunks(text, size=50, overlap=0)
    for a, b in itertools.pairwise(result):
        assert b.start > a.end
    assert " ".join(c.text for c in result) == text
    assert all(c.tokens > 25 for c in result[:-1])  # greedy: near the limit


def test_a_truncating_tokenizer_is_not_trusted_nor_changed() -> None:
    truncating = Tokenizer.from_file(TOKENIZER_FILE)  # truncation and padding at 128, as shipped
    text = "The quick brown fox jumps over the lazy dog. " * 300
    assert chunks(text, 200, 20, tokenizer=truncating) == chunks(text, 200, 20)
    assert truncating.truncation is not None and truncating.padding is not None


def test_a_megabyte_is_chunked_whole() -> None:
    """Correctness at size; the speed (about 1 s a megabyte) is measured by `python -m benchmarks chunker`."""
    text = "\n\n".join(
        " ".join(f"Paragraph {p} sentence {s} talks about proteins and cells." for s in range(8)) for p in range(2400)
    )
    assert len(text) > 1_000_000
    result = chunks(text, size=200, overlap=30)
    assert all(c.tokens <= 200 for c in result) and len(result) > 1000
    assert result[-1].end == len(text)


def test_unpaired_surrogates_are_refused_with_a_reason() -> None:
    with pytest.raises(AgentloomError, match="unpaired surrogate"):
        chunks("abc \ud800 def")


@pytest.mark.parametrize(
    ("size", "overlap", "max_tokens", "fragment"),
    [
        (8, 0, 256, "chunk_size is 8 tokens, outside the accepted range 16..254"),
        (300, 0, 256, "chunk_size is 300 tokens, outside the accepted range 16..254"),
        (40, 40, 256, "chunk_overlap is 40 tokens, outside the accepted range 0..39"),
        (40, -1, 256, "chunk_overlap is -1 tokens"),
        (16, 0, 10, "max_tokens of the embedding model is 10"),
        (20.5, 0, 256, "chunk_size must be a whole number"),
    ],
)
def test_settings_are_validated(size: int, overlap: int, max_tokens: int, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        chunks("some text", size, overlap, max_tokens)
    assert fragment in str(err.value)
