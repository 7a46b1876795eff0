"""Split text into chunks measured in the embedding model's own tokens.

The text is tokenized once (in large whitespace-aligned segments, encoded as one batch) and
every possible cut sits between two tokens. Cuts prefer, in order, a paragraph break (a
blank line), a sentence end (. ! ? followed by whitespace, or 。！？), a line break, any
whitespace, and only then a bare token boundary. Chunks are packed greedily up to
``chunk_tokens`` (at least half full unless the text ends) and consecutive chunks share
about ``overlap_tokens`` tokens. No chunk holds more than ``chunk_tokens`` tokens (at most
``max_tokens - 2``: room for [CLS] and [SEP]) once encoded on its own: a chunk cut inside a
word is re-encoded alone and split again if it grew.
"""

from __future__ import annotations

import math
import re
import unicodedata
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from agentloom.core.errors import AgentloomError, ConfigError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MIN_CHUNK_TOKENS = 16
PARAGRAPH, SENTENCE, LINE, SPACE, BARE = 4, 3, 2, 1, 0  # how good a cut is

# Scripts written without spaces (CJK, kana, Hangul, full-width forms) and emoji: API
# tokenizers spend about one token a character on them, so the estimate does too.
_WIDE = "\u1100-\u11ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U0001f000-\U0001faff\U00020000-\U0003ffff"
_PSEUDO_TOKEN = re.compile(rf"[{_WIDE}]|[^\s{_WIDE}]{{1,4}}")
_CLOSERS = "\"'”’»)\\]」』"
_SEGMENT_CHARS = 32_768  # one huge encode is slower than a batch of segments (which also runs in parallel)
_SURROGATE = re.compile("[\ud800-\udfff]")
SECTION_CHARS = 131_072  # chunk_sections: a long text is chunked this much at a time


@dataclass(frozen=True)
class Chunk:
    index: int  # 0-based position in the document
    text: str  # exactly text[start:end]
    start: int  # character offsets into the original text
    end: int
    tokens: int  # length in the model's tokens, without [CLS]/[SEP]


def chunk_text(
    text: str, *, tokenizer: Tokenizer | None, chunk_tokens: int, overlap_tokens: int, max_tokens: int
) -> list[Chunk]:
    """Chunks of `text` (see the module docstring); [] for an empty or whitespace-only text.

    `tokenizer` is the embedding model's; None (API models) estimates a token as four
    characters of a word (one per CJK character or emoji).
    """
    _validate(chunk_tokens, overlap_tokens, max_tokens)
    if not text or text.isspace():
        return []
    check_unicode(text)
    starts, _, hard_segments = _token_spans(text, tokenizer)
    n = len(starts)
    if n == 0:  # only characters the tokenizer drops (controls, zero-width): keep them, they cost nothing
        left, right = _strip(text, 0, len(text))
        return [Chunk(0, text[left:right], left, right, 0)]
    rank, spaced = _cut_ranks(text, starts)
    hard_cuts = np.searchsorted(starts, np.asarray(hard_segments, dtype=np.int64))
    # cut c (0 < c < n) falls just before token c: chunk [i, j) spans text[cut_at[i]:cut_at[j]], stripped
    cut_at = np.empty(n + 1, dtype=np.int64)
    cut_at[0], cut_at[1:n], cut_at[n] = 0, starts[1:], len(text)

    pieces = _pack(rank, 0, n, chunk_tokens, overlap_tokens)
    if tokenizer is not None:
        pieces = _fit(text, tokenizer, pieces, rank, spaced, hard_cuts, cut_at, chunk_tokens)

    chunks: list[Chunk] = []
    for i, j, tokens in pieces:
        left, right = _strip(text, int(cut_at[i]), int(cut_at[j]))
        if left < right:  # a run of whitespace-only tokens (some tokenizers have them) is no chunk
            chunks.append(Chunk(len(chunks), text[left:right], left, right, tokens))
    return chunks


def check_unicode(text: str) -> None:
    """Refuse a text with an unpaired surrogate, which no tokenizer accepts (found without copying the text)."""
    found = _SURROGATE.search(text)
    if found is not None:
        raise AgentloomError(
            f"text has an unpaired surrogate ({found.group()!r}) at character {found.start()}, which no tokenizer "
            "accepts: send valid Unicode (encode the text as UTF-8 before sending it)."
        )


def chunk_sections(
    text: str,
    *,
    tokenizer: Tokenizer | None,
    chunk_tokens: int,
    overlap_tokens: int,
    max_tokens: int,
    section_chars: int = SECTION_CHARS,
) -> Iterator[list[Chunk]]:
    """The chunks of `text`, a section of about `section_chars` at a time, so that a long text (a
    book) costs memory for one section and the caller can stop or report between sections.

    Sections end at a paragraph break where one is near (else a line break or a space), the cut
    :func:`chunk_text` prefers anyway; no chunk spans two sections. Indexes and offsets are the
    whole text's. A text of at most `section_chars` gives exactly ``chunk_text(text)``.
    """
    start, index = 0, 0
    while start < len(text):
        end = _section_end(text, start, section_chars)
        chunks = chunk_text(
            text[start:end],
            tokenizer=tokenizer,
            chunk_tokens=chunk_tokens,
            overlap_tokens=overlap_tokens,
            max_tokens=max_tokens,
        )
        yield [replace(c, index=index + i, start=c.start + start, end=c.end + start) for i, c in enumerate(chunks)]
        index += len(chunks)
        start = end


def _section_end(text: str, start: int, size: int) -> int:
    if len(text) - start <= size:
        return len(text)
    lo, hi = start + size // 2, start + size
    for separator in ("\n\n", "\n", " "):
        cut = text.rfind(separator, lo, hi)
        if cut >= 0:
            return cut + len(separator)
    return hi  # no whitespace in half a section: a hard cut


def _validate(chunk_tokens: int, overlap_tokens: int, max_tokens: int) -> None:
    for name, value in (("chunk_size", chunk_tokens), ("chunk_overlap", overlap_tokens), ("max_tokens", max_tokens)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be a whole number of tokens, got {value!r}.")
    hard_limit = max_tokens - 2
    if hard_limit < MIN_CHUNK_TOKENS:
        raise ConfigError(
            f"max_tokens of the embedding model is {max_tokens}: too small to chunk for; "
            f"configure a model that accepts at least {MIN_CHUNK_TOKENS + 2} tokens."
        )
    if not MIN_CHUNK_TOKENS <= chunk_tokens <= hard_limit:
        raise ConfigError(
            f"chunk_size is {chunk_tokens} tokens, outside the accepted range {MIN_CHUNK_TOKENS}..{hard_limit} "
            f"(this model reads {max_tokens} tokens, 2 of them [CLS] and [SEP]); set chunk_size within it."
        )
    if not 0 <= overlap_tokens < chunk_tokens:
        raise ConfigError(
            f"chunk_overlap is {overlap_tokens} tokens, outside the accepted range 0..{chunk_tokens - 1} "
            f"(below chunk_size, {chunk_tokens}); lower chunk_overlap or raise chunk_size."
        )


_counters: weakref.WeakKeyDictionary[Tokenizer, Tokenizer] = weakref.WeakKeyDictionary()


def _counter(tokenizer: Tokenizer) -> Tokenizer:
    """The tokenizer itself, or a copy without truncation or padding (either would miscount)."""
    if tokenizer.truncation is None and tokenizer.padding is None:
        return tokenizer
    copy = _counters.get(tokenizer)
    if copy is None:
        from tokenizers import Tokenizer

        copy = Tokenizer.from_str(tokenizer.to_str())
        copy.no_truncation()
        copy.no_padding()
        _counters[tokenizer] = copy
    return copy


def _token_spans(text: str, tokenizer: Tokenizer | None) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Start and end character offsets of every (non-empty) token, in order, and the offsets
    where a segment had to be cut with no whitespace (tokens there may differ from one encode)."""
    hard: list[int] = []
    if tokenizer is None:
        parts = [np.asarray([m.span() for m in _PSEUDO_TOKEN.finditer(text)], dtype=np.int64).reshape(-1, 2)]
    else:
        bases = _segments(text)
        segments = [text[a:b] for a, b in zip(bases, bases[1:] + [len(text)])]
        encodings = _counter(tokenizer).encode_batch(segments, add_special_tokens=False)
        parts = [np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2) + base for base, enc in zip(bases, encodings)]
        hard = [b for b in bases[1:] if not text[b - 1].isspace()]
    arr = np.concatenate(parts)
    arr = arr[arr[:, 1] > arr[:, 0]]  # special and padding tokens cover no text
    if np.any(np.diff(arr[:, 0]) < 0):  # no known tokenizer does this, but searchsorted needs order
        arr = arr[np.argsort(arr[:, 0], kind="stable")]
    return arr[:, 0], arr[:, 1], hard


def _segments(text: str) -> list[int]:
    """Start offsets of segments of about _SEGMENT_CHARS, each beginning after a blank line or a space."""
    bases = [0]
    while len(text) - bases[-1] > _SEGMENT_CHARS:
        lo, hi = bases[-1] + _SEGMENT_CHARS // 2, bases[-1] + _SEGMENT_CHARS
        cut = text.rfind("\n\n", lo, hi)
        if cut < 0:
            cut = max(text.rfind(" ", lo, hi), text.rfind("\n", lo, hi), text.rfind("\t", lo, hi))
        bases.append(cut + 1 if cut >= 0 else hi)  # no whitespace at all: a hard cut, re-counted later
    return bases


# str.isspace() characters, so that "whitespace" means the same here and in str.strip()
_SPACES = np.array([c for c in range(0x3001) if chr(c).isspace()], dtype=np.uint32)
# Of those, the ones a tokenizer splits words at. The others (form feed, vertical tab, \x1c-\x1f,
# \x85: control characters) are deleted by BERT's normaliser, which joins the words around them, so
# a cut there counts as one inside a word (re-counted).
_SEPARATORS = np.array(
    [c for c in _SPACES.tolist() if chr(c) in "\t\n\r" or unicodedata.category(chr(c)) == "Zs"], dtype=np.uint32
)
_LATIN_ENDS = np.array([ord(c) for c in ".!?…"], dtype=np.uint32)
_CJK_ENDS = np.array([ord(c) for c in "。！？"], dtype=np.uint32)
_CLOSER_CODES = np.array([ord(c) for c in _CLOSERS], dtype=np.uint32)


def _cut_ranks(text: str, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each cut c (before token c): its rank, and whether whitespace separates the two tokens.

    Vectorised over the characters: a Python loop over the matches of a 1 MB text costs more
    than its tokenization."""
    n = len(starts)
    rank = np.full(n + 1, BARE, dtype=np.int8)
    spaced = np.zeros(n + 1, dtype=bool)
    code = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    space = np.isin(code, _SPACES)
    run_start = np.flatnonzero(space & ~np.concatenate(([False], space[:-1])))
    run_end = np.flatnonzero(space & ~np.concatenate((space[1:], [False]))) + 1
    newlines = np.concatenate(([0], np.cumsum(code == 10)))

    def at(positions: np.ndarray, value: int) -> None:
        c = np.searchsorted(starts, positions, side="left")
        np.maximum.at(rank, c[(c > 0) & (c < n)], value)

    at(run_start, SPACE)
    separators = np.concatenate(([0], np.cumsum(np.isin(code, _SEPARATORS))))
    splits = run_start[separators[run_end] - separators[run_start] > 0]  # runs holding a separator
    c = np.searchsorted(starts, splits, side="left")
    spaced[c[(c > 0) & (c < n)]] = True
    at(np.flatnonzero(code == 10), LINE)
    # a sentence ends before whitespace, after . ! ? … and maybe one closing quote or bracket
    before = run_start[run_start > 0] - 1
    closer = np.isin(code[before], _CLOSER_CODES) & (before > 0)
    before[closer] -= 1
    at(run_start[run_start > 0][np.isin(code[before], _LATIN_ENDS)], SENTENCE)
    cjk = np.flatnonzero(np.isin(code, _CJK_ENDS)) + 1
    inside = cjk < len(code)
    cjk[inside] += np.isin(code[cjk[inside]], _CLOSER_CODES)
    at(cjk, SENTENCE)
    at(run_start[newlines[run_end] - newlines[run_start] >= 2], PARAGRAPH)  # a blank line
    return rank, spaced


def _pack(rank: np.ndarray, first: int, last: int, limit: int, overlap: int) -> list[tuple[int, int, int]]:
    """Greedy chunks (i, j, tokens) over tokens [first, last), at most `limit` tokens each."""
    pieces: list[tuple[int, int, int]] = []
    min_fill = max(1, limit // 2)
    i, previous_end = first, first
    while True:
        if last - i <= limit:
            pieces.append((i, last, last - i))
            return pieces
        # the best cut in [i + min_fill, i + limit], latest among the best; always past the previous chunk
        lo, hi = max(i + min_fill, previous_end + 1), i + limit
        window = rank[lo : hi + 1]
        best = window.max()
        j = hi - int(np.argmax(window[::-1] == best))
        pieces.append((i, j, j - i))
        previous_end = j
        if overlap == 0:
            i = j
            continue
        # the next chunk starts about `overlap` tokens back, at the best cut there, earliest among the best
        lo, hi = max(i + 1, j - overlap), j - max(1, math.ceil(overlap / 2))
        if lo > hi:
            i = max(i + 1, j - overlap)
            continue
        window = rank[lo : hi + 1]
        i = lo + int(np.argmax(window == window.max()))


def _fit(
    text: str,
    tokenizer: Tokenizer,
    pieces: list[tuple[int, int, int]],
    rank: np.ndarray,
    spaced: np.ndarray,
    hard_cuts: np.ndarray,
    cut_at: np.ndarray,
    limit: int,
) -> list[tuple[int, int, int]]:
    """Re-count chunks cut where no whitespace separates tokens (inside a word, or CJK), or
    holding a segment's hard cut: a word piece encoded alone may split into more tokens, or
    fewer. A chunk that outgrew the limit is split again."""
    counter = _counter(tokenizer)
    n = len(cut_at) - 1

    def needs_count(i: int, j: int) -> bool:
        inside = np.searchsorted(hard_cuts, i, "right") < np.searchsorted(hard_cuts, j, "left")
        return bool(inside) or (i > 0 and not spaced[i]) or (j < n and not spaced[j])

    out: list[tuple[int, int, int]] = []
    todo = list(pieces)
    while todo:
        recount = [p for p in todo if needs_count(p[0], p[1])]
        texts = [text[int(cut_at[i]) : int(cut_at[j])] for i, j, _ in recount]
        counts = {p: len(e.ids) for p, e in zip(recount, counter.encode_batch(texts, add_special_tokens=False))}
        retry: list[tuple[int, int, int]] = []
        for piece in todo:
            i, j, tokens = piece
            real = counts.get(piece, tokens)
            if real <= limit or j - i == 1:  # a single token cannot be cut further
                out.append((i, j, real))
            else:
                smaller = max(1, (j - i) * limit // real - 1)
                retry.extend(_pack(rank, i, j, smaller, 0))
        todo = retry
    out.sort()
    return out


def _strip(text: str, left: int, right: int) -> tuple[int, int]:
    while left < right and text[left].isspace():
        left += 1
    while right > left and text[right - 1].isspace():
        right -= 1
    return left, right
