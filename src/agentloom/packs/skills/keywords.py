"""Keyword matching for when the embedding model fails: CJK-aware (character n-grams)."""

from __future__ import annotations

import functools
import re

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Compiled on first use: the fallback is rare, and compiling costs start-up time."""
    return re.compile(rf"[{_CJK}]+|[a-z0-9]+"), re.compile(rf"[{_CJK}]")


_STOP = {
    "a",
    "an",
    "the",
    "to",
    "of",
    "for",
    "and",
    "or",
    "in",
    "on",
    "my",
    "me",
    "i",
    "is",
    "it",
    "with",
    "use",
    "this",
    "that",
}


def grams(text: str) -> set[str]:
    """Latin words (lowercase, stop words out) plus CJK character unigrams and bigrams."""
    run_pattern, is_cjk = _patterns()
    out: set[str] = set()
    for run in run_pattern.findall(text.lower()):
        if is_cjk.match(run):
            out.update(run)
            out.update(run[i : i + 2] for i in range(len(run) - 1))
        elif run not in _STOP and (len(run) > 1 or run.isdigit()):
            out.add(run)
    return out


def keyword_score(query: str, name: str, description: str, tags: list[str]) -> float:
    """Share of the query's n-grams found in the skill (bigrams weigh twice); 0 when nothing matches."""
    wanted = grams(query)
    if not wanted:
        return 0.0
    have = grams(f"{name.replace('-', ' ')} {name} {description} {' '.join(tags)}")
    is_cjk = _patterns()[1]
    weight = {g: (2.0 if len(g) > 1 or not is_cjk.match(g) else 1.0) for g in wanted}
    total = sum(weight.values())
    return round(sum(w for g, w in weight.items() if g in have) / total, 4)
