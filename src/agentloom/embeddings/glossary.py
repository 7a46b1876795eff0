"""Chinese and English words for the same things (``glossary.json``): a request's translation and its terms.

Used where a search meets requests in one language and texts in another: the skills pack (its rank
model reads the translation; shared terms add to a score) and the flowise pack's template search.

Multilingual embedding models align whole sentences across languages, but short requests in one
language often miss the one word that decides the skill: 帮我提交代码 is about committing (提交 is
git's "commit"), yet to the models it is mostly about 代码, "code". Dictionary-based query translation,
the classic remedy of cross-language retrieval, gives them that word, and the same dictionary lets
both languages meet on one set of terms:

- ``translate(request)``: the Chinese words of a request that the glossary knows, replaced by their
  first English equivalent (the rest of the Chinese dropped); None when it knows none. Longest match
  first, so 代码评审 is "code review", not "code" + "review".
- ``terms(text)``: the glossary entries a text mentions, in either language (an entry is named by its
  Chinese form), for the skills search's lexical share.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

DATA = "glossary.json"
IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs, for a regex character class
_CJK_RUN = re.compile(f"[{IDEOGRAPHS}]+")
_WORDS = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Glossary:
    english: dict[str, tuple[str, ...]]  # Chinese term -> its English equivalents, most common first
    entries: dict[tuple[str, ...], str]  # an English equivalent as words -> the Chinese term of its entry
    longest: int  # characters of the longest Chinese term
    longest_english: int  # words of the longest English equivalent

    def _chinese(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, term) of every glossary term in ``text``, longest match first, left to right."""
        found, i = [], 0
        while i < len(text):
            for size in range(min(self.longest, len(text) - i), 1, -1):
                if text[i : i + size] in self.english:
                    found.append((i, i + size, text[i : i + size]))
                    i += size
                    break
            else:
                i += 1
        return found

    def translate(self, request: str) -> str | None:
        spans = self._chinese(request)
        if not spans:
            return None
        out, at = [], 0
        for start, end, term in spans:
            out.append(request[at:start])
            out.append(f" {self.english[term][0]} ")
            at = end
        out.append(request[at:])
        english = " ".join(_CJK_RUN.sub(" ", "".join(out)).split())
        return english or None

    def terms(self, text: str) -> frozenset[str]:
        found = {term for _, _, term in self._chinese(text)}
        words = _WORDS.findall(text.lower())
        i = 0
        while i < len(words):
            for size in range(min(self.longest_english, len(words) - i), 0, -1):
                term = self.entries.get(tuple(words[i : i + size]))
                if term is None and size == 1 and words[i].endswith("s"):  # plurals: commits, branches
                    term = self.entries.get((words[i][:-1],)) or self.entries.get((words[i][:-2],))
                if term is not None:
                    found.add(term)
                    i += size
                    break
            else:
                i += 1
        return frozenset(found)


@cache
def glossary() -> Glossary:
    raw = json.loads(resources.files("agentloom.embeddings").joinpath(DATA).read_text(encoding="utf-8"))
    english: dict[str, tuple[str, ...]] = {}
    entries: dict[tuple[str, ...], str] = {}
    for chinese, *equivalents in raw["terms"]:
        english[chinese] = tuple(equivalents)
        for phrase in equivalents:
            entries.setdefault(tuple(_WORDS.findall(phrase.lower())), chinese)
    entries.pop((), None)
    return Glossary(
        english=english,
        entries=entries,
        longest=max(map(len, english)),
        longest_english=max(map(len, entries)),
    )
