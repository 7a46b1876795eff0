"""What every skills score is measured against: 480 ordinary texts, the same 240 sentences in English and Chinese.

A multilingual model's raw cosine mixes meaning with two things a score must not depend on:

- **the language of both sides.** A Chinese request is nearer any Chinese text than the same
  request in English is, so "is written in Chinese" outranks "is about committing code". The
  vectors of two sentences of the same meaning in English and Chinese differ mostly along a few
  directions; ``LANGUAGE_DIRECTIONS`` of them (the top singular vectors of the 240 differences)
  are projected out of every vector, request and skill alike, before any cosine.
- **the request and the skill themselves.** A long or generic request sits near everything, some
  descriptions near every request. So a cosine is compared with what the same two texts score
  against ordinary text (score normalisation against a cohort, "S-norm" in speaker verification):
  ``z = ((c - mean_q) / std_q + (c - mean_s) / std_s) / 2`` where ``mean_q, std_q`` are the
  request's cosines to all 480 background texts and ``mean_s, std_s`` the skill's cosines to the
  240 background texts in the request's language. ``z`` says how far above ordinary text a pair
  scores; it reads the same for every request, language and index size, which a raw cosine does not.

The background's vectors are embedded once per model (key, fingerprint and the data file's
digest), announced as a first-use build, and kept in the cache dir.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from agentloom.core.work import current
from agentloom.embeddings.firstuse import building
from agentloom.embeddings.glossary import IDEOGRAPHS
from agentloom.embeddings.providers.normalise import l2_normalise

if TYPE_CHECKING:
    import numpy as np

    from agentloom.embeddings import EmbeddingService, ModelRecord

log = logging.getLogger("agentloom.packs.skills")

DATA = "background.json"
LANGUAGE_DIRECTIONS = 2
_CJK = re.compile(f"[{IDEOGRAPHS}]")
_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str, str], Background] = {}


def language(text: str) -> str:
    """ "zh" when the text has two or more CJK ideographs, else "en" (the background's two languages)."""
    return "zh" if len(_CJK.findall(text, 0, 2000)) >= 2 else "en"


@cache
def _pairs() -> tuple[list[tuple[str, str]], str]:
    raw = resources.files("agentloom.packs.skills").joinpath(DATA).read_bytes()
    pairs = [(en, zh) for en, zh in json.loads(raw)["pairs"]]
    return pairs, hashlib.sha256(raw).hexdigest()[:16]


def _without(vectors: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``vectors`` (one or a matrix) with the ``basis`` directions projected out, L2-normalised again."""
    import numpy as np

    arr = np.asarray(vectors, dtype=np.float32)
    rows = np.atleast_2d(arr)
    return l2_normalise(rows - (rows @ basis.T) @ basis).reshape(arr.shape)


def cosines(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Dot products of every row with ``vector`` (cosines: both sides are L2-normalised).

    einsum, not ``matrix @ vector``: the BLAS product wakes OpenBLAS's thread pool, and on a loaded
    2-core machine that now and then costs more than the rest of a search.
    """
    import numpy as np

    products: np.ndarray = np.einsum("ij,j->i", matrix, vector)
    return products


@dataclass(frozen=True)
class SkillStats:
    """Each skill's cosines to the background, per language of the request: (means, stds), one per skill."""

    by_language: dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Background:
    basis: np.ndarray  # (LANGUAGE_DIRECTIONS, dimensions): the directions that tell the languages apart
    texts: np.ndarray  # (480, dimensions): every background text, language-neutral and L2-normalised
    by_language: dict[str, np.ndarray]  # "en" / "zh" -> (240, dimensions), rows of ``texts``

    @classmethod
    def from_vectors(cls, english: np.ndarray, chinese: np.ndarray) -> Background:
        import numpy as np

        english, chinese = l2_normalise(english), l2_normalise(chinese)
        basis = np.linalg.svd(chinese - english, full_matrices=False)[2][:LANGUAGE_DIRECTIONS]
        en, zh = _without(english, basis), _without(chinese, basis)
        return cls(basis=basis, texts=np.vstack([en, zh]), by_language={"en": en, "zh": zh})

    def neutral(self, vectors: np.ndarray) -> np.ndarray:
        """``vectors`` (one or a matrix) without their language directions, L2-normalised again."""
        return _without(vectors, self.basis)

    def skill_stats(self, skills: np.ndarray) -> SkillStats:
        """``skills``: neutral vectors, one row per skill."""
        out = {}
        for lang, texts in self.by_language.items():
            against = skills @ texts.T
            out[lang] = (against.mean(axis=1), against.std(axis=1))
        return SkillStats(out)

    def zscores(self, skills: np.ndarray, stats: SkillStats, request: np.ndarray, lang: str) -> np.ndarray:
        """The S-norm of ``request`` (a neutral vector) against every skill (neutral rows of ``skills``)."""
        import numpy as np

        similar = cosines(skills, request)
        around = cosines(self.texts, request)
        means, stds = stats.by_language[lang]
        floor = np.float32(1e-6)  # a skill or request with no spread against the background scores 0, not inf
        by_request = (similar - around.mean()) / max(float(around.std()), 1e-6)
        by_skill = (similar - means) / np.maximum(stds, floor)
        return np.asarray(0.5 * (by_request + by_skill))


def background(embeddings: EmbeddingService, record: ModelRecord, cache_dir: Path) -> Background:
    """The background for ``record``: from memory, from the cache dir, or embedded now (once per model)."""
    import numpy as np

    pairs, digest = _pairs()
    key = (record.key, record.fingerprint, digest)
    with _LOCK:
        loaded = _LOADED.get(key)
        if loaded is not None:
            return loaded
        name = hashlib.sha256("\0".join(key).encode()).hexdigest()[:24]
        path = cache_dir / "skills-background" / f"{name}.npy"
        try:
            vectors = np.load(path)
            if vectors.shape != (2 * len(pairs), record.dimensions):
                raise ValueError(f"shape {vectors.shape}")
        except (OSError, ValueError) as exc:
            if path.exists():
                log.warning("skills: background vectors at %s are unusable (%s): embedding them again", path, exc)
            texts = [text for pair in pairs for text in pair]
            what = f"the skills background of {record.key} ({len(texts)} texts)"
            with building(what, "first use of this model for skills", path, "a few seconds", current().note) as step:
                vectors = embeddings.embed_documents(
                    texts, record.key, progress=lambda done, total: step(f"embedded {done} of {total} background texts")
                )
            vectors = vectors.reshape(len(pairs), 2, -1).transpose(1, 0, 2).reshape(2 * len(pairs), -1)
            _save(path, vectors)
        made = Background.from_vectors(vectors[: len(pairs)], vectors[len(pairs) :])
        _LOADED[key] = made
        return made


def _save(path: Path, vectors: np.ndarray) -> None:
    import numpy as np

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        with part.open("wb") as f:
            np.save(f, vectors)
        os.replace(part, path)
    except OSError as exc:  # a read-only cache: embedded again by the next process, still correct
        log.warning("skills: background vectors not cached at %s (%s)", path, exc)
