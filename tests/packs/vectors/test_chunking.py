"""The chunker, with the real all-MiniLM-L6-v2 tokenizer: invariants, boundaries, limits."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Encoding, Tokenizer

from agentloom.core.errors import AgentloomError, ConfigError
from agentloom.embeddings.bert.build import MINILM_TOKENIZER
from agentloom.packs.vectors.chunking import (
    BARE,
    LINE,
    PARAGRAPH,
    SENTENCE,
    SPACE,
    Chunk,
    _counter,
    _cut_ranks,
    _pack,
    _segments,
    _strip,
    _token_spans,
    chunk_sections,
    chunk_text,
)
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
    "word ",
    "Hello",
    " the ",
    "naïve ",
    "unbelievably ",
    "Café",
    ". ",
    "! ",
    "? ",
    ".",
    "\n",
    "\n\n",
    "\t",
    " ",
    "猫",
    "好き",
    "。",
    "！",
    "🙂",
    "👩\u200d💻",
    "\u200b",
    "\x00",
    "\u0301",
    "x" * 150,
    "ﬁ",
    "ｆｕｌｌ",
    "”",
    "\u3000",
    "supercalifragilisticexpialidocious",
    "3.14",
    "(a)",
    "##",
    "[UNK]",
    "\u2028",
    "\x0c",
    "\x0b",
    "\x85",
]


@settings(max_examples=examples(60), deadline=None)
@given(
    st.one_of(
        st.lists(st.sampled_from(PIECES), max_size=250).map("".join),
        st.text(st.characters(blacklist_categories=["Cs"]), max_size=400),
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


@pytest.mark.slow
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


# -- exact messages, the tokenizer copy, and the building blocks on known inputs ---------------


@pytest.mark.parametrize(
    ("size", "overlap", "max_tokens", "message"),
    [
        (True, 0, 256, "chunk_size must be a whole number of tokens, got True."),
        (40, "3", 256, "chunk_overlap must be a whole number of tokens, got '3'."),
        (40, False, 256, "chunk_overlap must be a whole number of tokens, got False."),
        (40, 0, 256.0, "max_tokens must be a whole number of tokens, got 256.0."),
        (40, 0, None, "max_tokens must be a whole number of tokens, got None."),
        (
            16,
            0,
            17,
            "max_tokens of the embedding model is 17: too small to chunk for; configure a model that accepts "
            "at least 18 tokens.",
        ),
        (
            15,
            0,
            256,
            "chunk_size is 15 tokens, outside the accepted range 16..254 (this model reads 256 tokens, 2 of "
            "them [CLS] and [SEP]); set chunk_size within it.",
        ),
        (
            255,
            0,
            256,
            "chunk_size is 255 tokens, outside the accepted range 16..254 (this model reads 256 tokens, 2 "
            "of them [CLS] and [SEP]); set chunk_size within it.",
        ),
        (
            17,
            0,
            18,
            "chunk_size is 17 tokens, outside the accepted range 16..16 (this model reads 18 tokens, 2 of "
            "them [CLS] and [SEP]); set chunk_size within it.",
        ),
        (
            40,
            40,
            256,
            "chunk_overlap is 40 tokens, outside the accepted range 0..39 (below chunk_size, 40); lower "
            "chunk_overlap or raise chunk_size.",
        ),
        (
            40,
            -1,
            256,
            "chunk_overlap is -1 tokens, outside the accepted range 0..39 (below chunk_size, 40); lower "
            "chunk_overlap or raise chunk_size.",
        ),
    ],
)
def test_settings_messages_word_for_word(size: int, overlap: int, max_tokens: int, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        chunks("some text", size, overlap, max_tokens)
    assert str(err.value) == message


@pytest.mark.parametrize(("size", "overlap", "max_tokens"), [(16, 0, 18), (254, 253, 256), (16, 15, 18), (40, 0, 42)])
def test_settings_at_the_edges_are_accepted(size: int, overlap: int, max_tokens: int) -> None:
    assert [c.text for c in chunks("some text", size, overlap, max_tokens)] == ["some text"]
    assert [c.text for c in chunks("some text", size, overlap, max_tokens, tokenizer=None)] == ["some text"]


def test_unpaired_surrogate_message_word_for_word() -> None:
    with pytest.raises(AgentloomError) as err:
        chunks("abc \ud800 def")
    assert str(err.value) == (
        "text has an unpaired surrogate ('\\ud800') at character 4, which no tokenizer accepts: send valid Unicode "
        "(encode the text as UTF-8 before sending it)."
    )


def test_text_of_only_dropped_characters_is_one_empty_chunk_without_its_spaces() -> None:
    assert chunks("\u200b\x00\u200b") == [Chunk(0, "\u200b\x00\u200b", 0, 3, 0)]
    assert chunks("  \u200b\x00 \n") == [Chunk(0, "\u200b\x00", 2, 4, 0)]


@pytest.mark.parametrize("setting", ["truncation", "padding", "both"])
def test_a_tokenizer_that_truncates_or_pads_is_counted_with_a_plain_copy(setting: str) -> None:
    tokenizer = Tokenizer.from_file(TOKENIZER_FILE)  # both, as shipped
    if setting == "truncation":
        tokenizer.no_padding()
    elif setting == "padding":
        tokenizer.no_truncation()
    text = "The quick brown fox jumps over the lazy dog. " * 40
    assert chunks(text, 100, 10, tokenizer=tokenizer) == chunks(text, 100, 10)
    counter = _counter(tokenizer)
    assert counter is not tokenizer and counter.truncation is None and counter.padding is None
    assert _counter(tokenizer) is counter  # made once
    assert (tokenizer.truncation is None, tokenizer.padding is None) == (setting == "padding", setting == "truncation")
    assert _counter(TOKENIZER) is TOKENIZER  # nothing to undo: used as it is


def test_cut_ranks_on_known_text() -> None:
    """Without a tokenizer a token is up to four characters of a word, or one CJK character."""
    text = 'One two. Three\nfour five\n\nsix 七。八」 nine? ten…  "x!" y'
    starts, ends, hard = _token_spans(text, None)
    assert hard == []
    rank, spaced = _cut_ranks(text, starts)
    shown = [(text[a:b], int(r), bool(s)) for a, b, r, s in zip(starts, ends, rank, spaced)]
    assert shown == [
        ("One", BARE, False),
        ("two.", SPACE, True),
        ("Thre", SENTENCE, True),
        ("e", BARE, False),
        ("four", LINE, True),
        ("five", SPACE, True),
        ("six", PARAGRAPH, True),
        ("七", SPACE, True),
        ("。", BARE, False),
        ("八", SENTENCE, False),
        ("」", BARE, False),
        ("nine", SPACE, True),
        ("?", BARE, False),
        ("ten…", SENTENCE, True),
        ('"x!"', SENTENCE, True),
        ("y", SENTENCE, True),
    ]
    assert (int(rank[-1]), bool(spaced[-1])) == (BARE, False) and len(rank) == len(spaced) == len(starts) + 1
    assert (rank.dtype, spaced.dtype) == (np.int8, np.bool_)  # a byte a cut
    # a closing quote or bracket after a CJK sentence end moves the cut past it; a quote that opens the
    # text is no closer of a sentence (nothing before it), whatever the text ends with
    text = '" one two.\n\n好。」再 end.'
    starts, ends, _ = _token_spans(text, None)
    rank, spaced = _cut_ranks(text, starts)
    assert [(text[a:b], int(r), bool(s)) for a, b, r, s in zip(starts, ends, rank, spaced)] == [
        ('"', BARE, False),
        ("one", SPACE, True),
        ("two.", SPACE, True),
        ("好", PARAGRAPH, True),
        ("。", BARE, False),
        ("」", BARE, False),
        ("再", SENTENCE, False),
        ("end.", SPACE, True),
    ]
    # whitespace before the first token or after the last is no cut: cuts 0 and n stay bare
    text = "\n\n  Hello there.  \n\n"
    starts, _, _ = _token_spans(text, None)
    rank, spaced = _cut_ranks(text, starts)
    assert (rank.tolist(), spaced.tolist()) == ([BARE, BARE, SPACE, BARE, BARE], [False, False, True, False, False])
    starts, _, _ = _token_spans("猫。", None)
    assert _cut_ranks("猫。", starts)[0].tolist() == [BARE, BARE, BARE]  # a sentence end at the very end: no cut


def test_pack_takes_the_latest_best_cut_and_backs_up_to_the_earliest_best() -> None:
    text = " ".join("aa bb cc dd ee." for _ in range(10))  # 5 tokens a sentence, without a tokenizer
    starts, _, _ = _token_spans(text, None)
    rank, _ = _cut_ranks(text, starts)
    assert len(starts) == 50
    assert _pack(rank, 0, 50, 16, 0) == [(0, 15, 15), (15, 30, 15), (30, 45, 15), (45, 50, 5)]
    assert _pack(rank, 0, 50, 16, 4) == [(0, 15, 15), (11, 25, 14), (21, 35, 14), (31, 45, 14), (41, 50, 9)]
    assert _pack(rank, 0, 50, 16, 15) == [
        (0, 15, 15),
        (5, 20, 15),
        (10, 25, 15),
        (15, 30, 15),
        (20, 35, 15),
        (25, 40, 15),
        (30, 45, 15),
        (35, 50, 15),
    ]
    result = chunk_text(text, tokenizer=None, chunk_tokens=16, overlap_tokens=4, max_tokens=100)
    assert [(c.start, c.end, c.tokens) for c in result] == [
        (0, 47, 15),
        (35, 79, 14),
        (67, 111, 14),
        (99, 143, 14),
        (131, 159, 9),
    ]
    assert result[1].text == "bb cc dd ee. aa bb cc dd ee. aa bb cc dd ee."

    flat = np.zeros(41, dtype=np.int8)
    assert _pack(flat, 0, 40, 16, 3) == [(0, 16, 16), (13, 29, 16), (26, 40, 14)]
    assert _pack(flat, 5, 40, 16, 0) == [(5, 21, 16), (21, 37, 16), (37, 40, 3)]
    assert _pack(flat, 0, 16, 16, 0) == [(0, 16, 16)] and _pack(flat, 3, 19, 16, 5) == [(3, 19, 16)]
    ties = np.zeros(41, dtype=np.int8)
    ties[[9, 11]], ties[[20, 22]] = 3, 2
    assert _pack(ties, 0, 40, 16, 6) == [(0, 11, 11), (5, 20, 15), (14, 22, 8), (16, 32, 16), (26, 40, 14)]
    # a chunk cut at half its size leaves no room to back up by half the overlap: one token on
    early = np.zeros(31, dtype=np.int8)
    early[8] = PARAGRAPH
    assert _pack(early, 0, 30, 16, 15) == [
        (0, 8, 8),
        (1, 17, 16),
        (8, 24, 16),
        (9, 25, 16),
        (10, 26, 16),
        (11, 27, 16),
        (12, 28, 16),
        (13, 29, 16),
        (14, 30, 16),
    ]
    # the next chunk always ends past the previous one, even when the best cut lies before it
    late = np.zeros(31, dtype=np.int8)
    late[12] = PARAGRAPH
    assert _pack(late, 0, 30, 16, 15) == [
        (0, 12, 12),
        (1, 17, 16),
        (2, 18, 16),
        (3, 19, 16),
        (4, 20, 16),
        (12, 28, 16),
        (13, 29, 16),
        (14, 30, 16),
    ]
    assert _pack(late, 0, 30, 17, 0) == [(0, 12, 12), (12, 29, 17), (29, 30, 1)]
    assert _pack(late, 0, 17, 16, 0) == [(0, 12, 12), (12, 17, 5)]


def test_segments_start_after_a_blank_line_or_whitespace_else_cut_hard() -> None:
    assert _segments("x" * 32768) == [0]
    assert _segments("x" * 32769) == [0, 32768]
    assert _segments("a" * 40000) == [0, 32768]
    assert _segments(("b" * 20000 + " ") * 4) == [0, 20001, 40002, 60003]
    assert _segments(("c" * 20000 + "\n\n") * 2 + "d" * 30000) == [0, 20001, 40003]
    assert _segments("y" * 20000 + "\t" + "z" * 20000) == [0, 20001]
    assert _segments("y" * 20000 + "\n" + "z" * 20000) == [0, 20001]
    assert _segments("y" * 20000 + " " + "y" * 5000 + "\n" + "z" * 20000) == [0, 25002]  # the latest whitespace
    assert _segments("y" * 20000 + "\n\n" + "y" * 5000 + " " + "z" * 20000) == [0, 20001]  # a blank line first
    assert _segments("y" * 10000 + " " + "z" * 30000) == [0, 32768]  # whitespace too early to use
    assert _token_spans("x" * 70000, TOKENIZER)[2] == [32768, 65536]
    assert _token_spans(("b" * 20000 + " ") * 4, TOKENIZER)[2] == []


def test_strip_moves_both_ends_past_whitespace_only() -> None:
    assert _strip("  ab  ", 0, 6) == (2, 4)
    assert _strip("   ", 0, 3) == (3, 3)
    assert _strip(" a ", 1, 2) == (1, 2)
    assert _strip("\n\tab c\u3000", 0, 7) == (2, 6)
    assert _strip("ab", 0, 2) == (0, 2)


def test_a_chunk_that_grows_when_encoded_alone_is_split_again() -> None:
    # made-up words of many word pieces: a chunk starting inside one ("##..." in context) counts more
    # tokens alone than in the text, goes over 16 and is packed again, smaller and without overlap
    text = "bcclfxzvjitgtbsvfnumzxqlroqiba okmnqfrfhhafkf qqlqvrf"
    starts, _, _ = _token_spans(text, TOKENIZER)
    rank, _ = _cut_ranks(text, starts)
    assert _pack(rank, 0, len(starts), 16, 8) == [(0, 16, 16), (8, 19, 11), (11, 27, 16), (19, 35, 16)]
    result = chunks(text, size=16, overlap=8, max_tokens=18)
    assert [(c.start, c.end, c.tokens, c.text) for c in result] == [
        (0, 25, 16, "bcclfxzvjitgtbsvfnumzxqlr"),
        (13, 30, 11, "bsvfnumzxqlroqiba"),
        (17, 30, 9, "numzxqlroqiba"),
        (31, 43, 8, "okmnqfrfhhaf"),
        (31, 53, 16, "okmnqfrfhhafkf qqlqvrf"),
    ]
    check_invariants(text, result, 16, 18)
    dense = chunks(text, size=16, overlap=15, max_tokens=18)
    assert len(dense) == 15 and [c.tokens for c in dense] == [16, 16, 15, 16, 16, 16, 14, 16, 16, 16, 16, 9, 3, 8, 16]
    check_invariants(text, dense, 16, 18)


def test_a_chunk_holding_a_hard_segment_cut_is_counted_again() -> None:
    # 70 000 letters without a space: encoded in three segments, one [UNK] each (a word over 100
    # characters), but one [UNK] when the chunk holding them is encoded alone
    text = "a " * 20 + "x" * 70000
    starts, _, hard = _token_spans(text, TOKENIZER)
    assert (len(starts), hard) == (23, [32768, 65536])
    rank, _ = _cut_ranks(text, starts)
    assert _pack(rank, 0, 23, 16, 0) == [(0, 16, 16), (16, 23, 7)]
    result = chunks(text, size=16, overlap=0, max_tokens=18)
    assert [(c.start, c.end, c.tokens) for c in result] == [(0, 31, 16), (32, 70040, 5)]
    check_invariants(text, result, 16, 18)


def test_segments_search_only_the_second_half_of_the_window_and_take_the_latest_break() -> None:
    # a break is looked for in [base + 16384, base + 32768): none earlier, none later
    assert _segments("y" * 12000 + " " + "z" * 30000) == [0, 32768]  # a space a third of the way in: too early
    assert _segments("y" * 1000 + "\n\n" + "y" * 20000 + " " + "z" * 12000) == [0, 21003]  # blank line too early
    assert _segments("y" * 1000 + "\n" + "z" * 32000) == [0, 32768]  # a line break too early
    assert _segments("y" * 1000 + "\t" + "z" * 32000) == [0, 32768]  # a tab too early
    assert _segments("y" * 20000 + " " + "y" * 20000 + "\n" + "z" * 100) == [0, 20001]  # a line break too late
    assert _segments("y" * 20000 + " " + "y" * 20000 + "\t" + "z" * 100) == [0, 20001]  # a tab too late
    # of two breaks of a kind in the window, the later one
    assert _segments("y" * 20000 + "\n\n" + "y" * 5000 + "\n\n" + "z" * 20000) == [0, 25003]
    assert _segments("y" * 20000 + " " + "y" * 5000 + " " + "z" * 20000) == [0, 25002]
    assert _segments("y" * 20000 + "\n" + "y" * 5000 + "\n" + "z" * 20000) == [0, 25002]
    assert _segments("y" * 20000 + "\t" + "y" * 5000 + "\t" + "z" * 20000) == [0, 25002]


def test_pack_fills_at_least_half_the_limit_and_overlaps_by_one_token() -> None:
    # a paragraph break after 6 of 16 tokens is under half full: passed over for a bare cut at the limit
    early = np.zeros(41, dtype=np.int8)
    early[6] = PARAGRAPH
    assert _pack(early, 0, 40, 16, 0) == [(0, 16, 16), (16, 32, 16), (32, 40, 8)]
    # the tiny limits a re-split chunk can get: half of 2 or 3 is one token, and a limit of 1 still works
    spaced = np.zeros(5, dtype=np.int8)
    spaced[1] = SPACE
    assert _pack(spaced, 0, 4, 2, 0) == [(0, 1, 1), (1, 3, 2), (3, 4, 1)]
    assert _pack(spaced, 0, 4, 3, 0) == [(0, 1, 1), (1, 4, 3)]
    assert _pack(spaced, 0, 4, 1, 0) == [(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 4, 1)]
    # an overlap of one token backs up by one
    flat = np.zeros(41, dtype=np.int8)
    assert _pack(flat, 0, 40, 16, 1) == [(0, 16, 16), (15, 31, 16), (30, 40, 10)]
    # an overlap of two backs up by one or two tokens, to the better cut
    ranked = np.zeros(41, dtype=np.int8)
    ranked[15], ranked[16] = SPACE, PARAGRAPH
    assert _pack(ranked, 0, 40, 16, 2) == [(0, 16, 16), (15, 31, 16), (29, 40, 11)]


def test_a_sentence_end_before_a_closer_at_the_start_of_the_text_counts() -> None:
    for text in ["?) Yes no", '." Yes no']:  # the closer is the text's second character
        starts, _, _ = _token_spans(text, None)
        assert _cut_ranks(text, starts)[0].tolist() == [BARE, SENTENCE, SPACE, BARE]


def test_a_cut_inside_a_hangul_syllable_is_counted_again() -> None:
    # MiniLM splits each syllable into its jamo (2 or 3 tokens), all with the syllable's offsets: a cut
    # between them falls before the whole syllable, so the chunk holds fewer tokens than it spans
    encoding = TOKENIZER.encode("한가", add_special_tokens=False)
    assert (encoding.tokens, encoding.offsets) == (["ᄒ", "##ᅡ", "##ᆫ", "##ᄀ", "##ᅡ"], [(0, 1)] * 3 + [(1, 2)] * 2)
    text = "한가나다라마바사"  # 3 + 7 * 2 = 17 tokens: the first chunk ends between the two of the last syllable
    assert [(c.start, c.end, c.tokens, c.text) for c in chunks(text, 16, 0, 18)] == [
        (0, 7, 15, "한가나다라마바"),
        (7, 8, 2, "사"),
    ]
    text = "한가나다라마바사아"  # 19 tokens: the first chunk ends inside the second-last syllable
    assert [(c.start, c.end, c.tokens, c.text) for c in chunks(text, 16, 0, 18)] == [
        (0, 7, 15, "한가나다라마바"),
        (7, 9, 4, "사아"),
    ]
    # a chunk starting inside the first syllable (one token on) starts before it: 17 tokens, split again
    result = chunks("한가나다라마바사", 16, 15, 18)
    assert [(c.start, c.end) for c in result] == [(0, 7), (0, 7), (7, 8)]
    check_invariants("한가나다라마바사", result, 16, 18)


def test_a_grown_chunk_is_packed_again_one_token_under_its_share() -> None:
    # one made-up word of 18 word pieces, overlap 15: the second chunk starts inside the word and grows
    # when encoded alone; it is packed again at (tokens * limit // real) - 1 tokens
    text = "bzdjnlhbgxnqnnlbxlgvphz"
    assert [(c.start, c.end, c.tokens, c.text) for c in chunks(text, 16, 15, 18)] == [
        (0, 20, 16, "bzdjnlhbgxnqnnlbxlgv"),
        (1, 19, 15, "zdjnlhbgxnqnnlbxlg"),
        (3, 23, 16, "jnlhbgxnqnnlbxlgvphz"),
        (19, 22, 2, "vph"),
    ]


class RecordingTokenizer:
    """The real tokenizer, keeping every batch of texts the chunker has it encode."""

    truncation = None
    padding = None

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[Encoding]:
        self.batches.append(list(texts))
        return TOKENIZER.encode_batch(texts, add_special_tokens=add_special_tokens)


def test_only_chunks_cut_inside_a_word_or_holding_a_hard_segment_cut_are_encoded_again() -> None:
    # whitespace at both ends of every chunk: the counts of the one tokenization are exact, nothing is re-encoded
    # (neither the first chunk nor the last)
    text = "The quick brown fox jumps over the lazy dog. " * 10
    spy = RecordingTokenizer()
    assert chunks(text, 16, 4, 18, tokenizer=spy) == chunks(text, 16, 4, 18)  # type: ignore[arg-type]  # a stand-in with the one method chunks calls
    assert spy.batches == [[text], []]
    # the chunk holding the hard cuts of a 70 000-letter word is; the one before it, ending at a space, is not
    text = "a " * 20 + "x" * 70000
    spy = RecordingTokenizer()
    assert chunks(text, 16, 0, 18, tokenizer=spy) == chunks(text, 16, 0, 18)  # type: ignore[arg-type]  # a stand-in with the one method chunks calls
    assert (len(spy.batches[0]), spy.batches[1:]) == (3, [[text[32:]]])
    # a segment cut hard right before a space: the chunks that start at it hold no hard cut
    text = "x" * 32768 + " a" * 20
    spy = RecordingTokenizer()
    assert chunks(text, 16, 15, 18, tokenizer=spy) == chunks(text, 16, 15, 18)  # type: ignore[arg-type]  # a stand-in with the one method chunks calls
    assert (len(spy.batches[0]), spy.batches[1:]) == (2, [[text[:32799]]])


def made_up_wordpiece() -> Tokenizer:
    """A real WordPiece tokenizer with a made-up vocabulary: the letters, alone and as word pieces, and two
    long word pieces, "##abcdefghijklmnop" and "##abcdefghijklmnopqrstuvwxy". Inside a word such a piece
    is one token; at the start of a text it cannot be used, and the letters count 16 or 25 tokens."""
    from tokenizers import models, pre_tokenizers

    vocab = {"[UNK]": 0}
    for letter in "abcdefghijklmnopqrstuvwxyz":
        vocab[letter], vocab[f"##{letter}"] = len(vocab), len(vocab) + 1
    vocab["##abcdefghijklmnop"], vocab["##abcdefghijklmnopqrstuvwxy"] = len(vocab), len(vocab) + 1
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


def test_a_chunk_that_grows_far_is_split_down_to_single_tokens_and_a_single_token_is_kept() -> None:
    tokenizer = made_up_wordpiece()
    assert len(tokenizer.encode("abcdefghijklmnop").ids) == 16 and len(tokenizer.encode("zzabcdefghijklmnop").ids) == 3
    # "z" * 16 + the 16-letter piece + " zz": the second chunk (the piece, then "z", "##z") counts 18 alone;
    # 3 * 16 // 18 - 1 = 1 token a chunk: three chunks, not "abc...p" and "zz"
    text = "z" * 16 + "abcdefghijklmnop zz"
    assert [(c.start, c.end, c.tokens, c.text) for c in chunks(text, 16, 0, 18, tokenizer=tokenizer)] == [
        (0, 16, 16, "z" * 16),
        (16, 32, 16, "abcdefghijklmnop"),
        (33, 34, 1, "z"),
        (34, 35, 1, "z"),
    ]
    # "z" * 16 + the 25-letter piece + "zzzzz", one word: the second chunk (6 tokens) counts 30 alone and is
    # packed again by 2; its first part (the piece and a "z", 26 alone) again by 1; the piece alone, 25
    # tokens, is one token in the text: it cannot be cut, and is kept over the limit
    text = "z" * 16 + "abcdefghijklmnopqrstuvwxy" + "z" * 5
    assert [(c.start, c.end, c.tokens, c.text) for c in chunks(text, 16, 0, 18, tokenizer=tokenizer)] == [
        (0, 16, 16, "z" * 16),
        (16, 41, 25, "abcdefghijklmnopqrstuvwxy"),
        (41, 42, 1, "z"),
        (42, 44, 2, "zz"),
        (44, 46, 2, "zz"),
    ]


def test_chunks_of_only_whitespace_tokens_are_dropped() -> None:
    # some tokenizers (SentencePiece ones, for instance) have line-break tokens: 17 of them after "a" make
    # a second chunk of nothing but line breaks, which is no chunk
    from tokenizers import Regex, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "\n": 1, "a": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r"[^\S\n]+"), "removed"), pre_tokenizers.Split("\n", "isolated")]
    )
    assert len(tokenizer.encode("a" + "\n" * 17).ids) == 18
    result = chunks("a" + "\n" * 17, 16, 0, 18, tokenizer=tokenizer)
    assert [(c.index, c.start, c.end, c.text) for c in result] == [(0, 0, 1, "a")]


class OutOfOrderTokenizer:
    """The real tokenizer, with the tokens of each encoding listed last to first (no known tokenizer
    does this; the chunker sorts them back)."""

    truncation = None
    padding = None

    class Reversed:
        def __init__(self, encoding: Encoding) -> None:
            self.ids, self.offsets = encoding.ids[::-1], encoding.offsets[::-1]

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[Reversed]:
        return [self.Reversed(e) for e in TOKENIZER.encode_batch(texts, add_special_tokens=add_special_tokens)]


def test_tokens_listed_out_of_order_are_sorted_by_start() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 3
    starts, ends, _ = _token_spans(text, OutOfOrderTokenizer())  # type: ignore[arg-type]  # a stand-in with the one method chunks calls
    expected = np.asarray(TOKENIZER.encode(text, add_special_tokens=False).offsets)
    assert (starts.tolist(), ends.tolist()) == (expected[:, 0].tolist(), expected[:, 1].tolist())
    assert chunks(text, 16, 4, 18, tokenizer=OutOfOrderTokenizer()) == chunks(text, 16, 4, 18)  # type: ignore[arg-type]  # a stand-in with the one method chunks calls


def test_a_form_feed_joins_words_for_the_model_so_a_cut_there_is_counted_again() -> None:
    # str.isspace() says yes to \x0c (pdftotext puts one between pages), but the model's normaliser
    # deletes it and reads the words around it as one word: a chunk cut there must be re-counted.
    text = "mgfxsvrpdfxdsh\x0cmfnzcmzwjmknxcjwh\x0cbnrrmrcvd\x0cvdlzxslrsk\x0cwtxqdpqcjxzbxhpnhtwv"
    result = chunks(text, size=16, overlap=0, max_tokens=18)
    check_invariants(text, result, 16, max_tokens=18)
    assert real_tokens("wtxqdpqcjxzbxhpnhtwv") == 17  # the chunk it used to end with, counted as 16
    assert [(c.text, c.tokens) for c in result] == [
        ("mgfxsvrpdfxdsh\x0cm", 10),
        ("fnzcmzwjmknxcjwh", 12),
        ("bnrrmrcvd\x0cvdlzxslrsk", 10),
        ("wtxqdpqcjxzbxhpnht", 15),
        ("wv", 2),
    ]
    # a space earlier in the text changes nothing for the form feeds after it
    result = chunks("a " + text, size=16, overlap=0, max_tokens=18)
    assert [(c.text, c.tokens) for c in result][-2:] == [("wtxqdpqcjxzbxhpnht", 15), ("wv", 2)]


def sections(
    text: str, section_chars: int, size: int = 40, overlap: int = 8, tokenizer: Tokenizer | None = TOKENIZER
) -> list[list[Chunk]]:
    return list(
        chunk_sections(
            text,
            tokenizer=tokenizer,
            chunk_tokens=size,
            overlap_tokens=overlap,
            max_tokens=256,
            section_chars=section_chars,
        )
    )


def test_a_text_within_one_section_is_chunked_exactly_as_chunk_text_does() -> None:
    text = "First paragraph about rivers.\n\nSecond one, about stones and light. " * 30
    assert sections(text, len(text)) == [chunks(text)]
    assert sections("", 100) == []


@pytest.mark.parametrize("tokenizer", [TOKENIZER, None])
def test_a_long_text_comes_a_section_at_a_time_with_the_whole_texts_indexes_and_offsets(
    tokenizer: Tokenizer | None,
) -> None:
    paragraphs = [
        f"Paragraph {i} tells of the harbor, the engine and winter number {i}." * (1 + i % 4) for i in range(60)
    ]
    text = "\n\n".join(paragraphs)
    parts = sections(text, 600, tokenizer=tokenizer)
    assert len(parts) > 5
    flat = [c for part in parts for c in part]
    assert [c.index for c in flat] == list(range(len(flat)))
    assert all(c.text == text[c.start : c.end] for c in flat)
    assert all(a.start < b.start for a, b in itertools.pairwise(flat))
    for before, after in itertools.pairwise(parts):  # no chunk spans two sections: a paragraph break between
        assert "\n\n" in text[before[-1].start : after[0].end]
    check_invariants(text, flat, 40, exact=tokenizer is not None)


def test_a_section_without_whitespace_is_cut_hard_at_its_size() -> None:
    text = "x" * 2500
    parts = sections(text, 1000, tokenizer=None)
    assert [(p[0].start, p[-1].end) for p in parts] == [(0, 1000), (1000, 2000), (2000, 2500)]
