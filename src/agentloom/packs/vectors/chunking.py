"""Split text into chunks measured in the embedding model's own tokens.

One encode of the whole text gives every token's character span; chunks are cut at token
boundaries, preferring (in order) a paragraph break, a sentence end, then any whitespace,
and never hold more than ``max_tokens - 2`` tokens (room for [CLS] and [SEP]).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentloom.core.errors import ConfigError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SENTENCE_END = (".", "!", "?", "。", "！", "？", "…")
_PSEUDO_TOKEN = re.compile(r"\S{1,4}")  # ~4 characters a token when the model's tokenizer is unknown


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    start: int
    end: int
    tokens: int


def _spans(text: str, tokenizer: Tokenizer | None) -> list[tuple[int, int]]:
    if tokenizer is None:
        return [m.span() for m in _PSEUDO_TOKEN.finditer(text)]
    encoding = tokenizer.encode(text, add_special_tokens=False)
    return [(s, e) for s, e in encoding.offsets if e > s]


def _break_rank(text: str, spans: list[tuple[int, int]], j: int) -> int:
    """How good a cut before token j is: 3 paragraph, 2 sentence, 1 whitespace, 0 mid-word."""
    gap = text[spans[j - 1][1] : spans[j][0]]
    if "\n\n" in gap or gap.count("\n") >= 2:
        return 3
    ends_sentence = text[spans[j - 1][1] - 1] in SENTENCE_END
    if ends_sentence and (gap or text[spans[j - 1][1] - 1] in "。！？"):
        return 2
    return 1 if gap else 0


def _best_cut(text: str, spans: list[tuple[int, int]], low: int, high: int) -> int:
    """The best cut in (low, high], latest among equals."""
    best, best_rank = high, -1
    for j in range(high, low, -1):
        rank = _break_rank(text, spans, j)
        if rank > best_rank:
            best, best_rank = j, rank
            if rank == 3:
                break
    return best


def _overlap_start(text: str, spans: list[tuple[int, int]], i: int, j: int, overlap: int) -> int:
    """Where the next chunk starts: the earliest best boundary in the last `overlap` tokens of this one."""
    low = max(i + 1, j - overlap)
    best, best_rank = low, -1
    for k in range(low, j):
        rank = _break_rank(text, spans, k)
        if rank > best_rank:
            best, best_rank = k, rank
    return best


def chunk_text(
    text: str, *, tokenizer: Tokenizer | None, chunk_tokens: int, overlap_tokens: int, max_tokens: int
) -> list[Chunk]:
    if chunk_tokens < 16:
        raise ConfigError(f"chunk_size must be at least 16 tokens, got {chunk_tokens}.")
    if not 0 <= overlap_tokens < chunk_tokens:
        raise ConfigError(f"chunk_overlap must be between 0 and chunk_size - 1 ({chunk_tokens - 1}), got {overlap_tokens}.")
    limit = min(chunk_tokens, max_tokens - 2)
    if limit < 16:
        raise ConfigError(f"the model's input limit ({max_tokens} tokens) is too small to chunk for.")
    overlap = min(overlap_tokens, limit // 2)
    spans = _spans(text, tokenizer)
    n = len(spans)
    chunks: list[Chunk] = []
    i = 0
    while i < n:
        end = min(i + limit, n)
        j = end if end == n else _best_cut(text, spans, i + max(1, limit // 2), end)
        start_char, end_char = spans[i][0], spans[j - 1][1]
        chunks.append(Chunk(len(chunks), text[start_char:end_char], start_char, end_char, j - i))
        if j >= n:
            break
        i = _overlap_start(text, spans, i, j, overlap) if overlap else j
    return chunks
