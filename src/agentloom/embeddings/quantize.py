"""int8 variants of local ONNX models, made on this machine from the exact file (no torch, no network).

Dynamic quantisation with onnxruntime: the weights of every MatMul and of the fused
Attention are stored as int8 with one scale per output channel; activations are quantised
to uint8 per batch at run time. Per-channel scales are what keep the vectors close to the
exact model's (per-tensor scales measured cosine 0.90 against it, per-channel 0.99).
Weights use the 7-bit range (``reduce_range``): on CPUs without VNNI, onnxruntime's
uint8 x int8 kernel adds pairs of products in 16 bits, which 8-bit weights can overflow;
with 7 bits the vectors are the same on every x86 CPU, at the same speed (measured).

The file is cached beside the exact one, ``<cache_dir>/models/<exact stem>-int8-<fingerprint>.onnx``;
the fingerprint covers the exact file (path, size, mtime) and :data:`QUANTIZER_VERSION`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from agentloom.core.errors import DependencyUnavailable
from agentloom.embeddings.cachefile import cache_path, written_atomically

# Bump when the quantisation settings change: it is part of the cache name.
QUANTIZER_VERSION = "1"
# The int8 model must stay this close (cosine of mean-pooled vectors) to the exact one on the
# check input, or the file is refused; measured about 0.99 on SciFact.
MIN_CHECK_COSINE = 0.95
FIX = "pip install 'onnx>=1.23' (agentloom depends on it; the quantiser needs it)"

Progress = Callable[[str], None]


def int8_path(source: Path, cache_dir: Path) -> Path:
    """Where the int8 variant of the exact ONNX file ``source`` is cached."""
    return cache_path(source, f"{source.stem}-int8", cache_dir, f"int8-{QUANTIZER_VERSION}", ".onnx")


class _QuietQuantiser(logging.Filter):
    """onnxruntime's quantiser logs advice on the root logger ("consider pre-processing"): drop it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or "quantization" not in record.pathname


def quantize_int8(source: Path, out: Path, progress: Progress | None = None) -> Path:
    """Write the int8 variant of ``source`` to ``out`` (atomically) and return ``out``.

    Raises :class:`DependencyUnavailable` naming what failed and the fix.
    """
    say = progress or (lambda _msg: None)
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise DependencyUnavailable(f"the int8 model cannot be made: {exc}. Fix: {FIX}.") from exc
    say(f"quantising {source.name} to int8 (one-time, on this machine)")
    quiet = _QuietQuantiser()
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        with written_atomically(out, "the int8 model") as tmp:
            quantize_dynamic(
                source,
                tmp,
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=True,
                # The graph holds onnxruntime's fused BERT operators, which ONNX shape inference
                # does not know: their outputs are float.
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
            cosine = _check(source, tmp)
            if cosine < MIN_CHECK_COSINE:
                raise DependencyUnavailable(
                    f"the int8 model of {source.name} strays from the float32 one (cosine {cosine:.3f} < "
                    f"{MIN_CHECK_COSINE}). Fix: use the float32 model, or report this with your CPU model."
                )
    except DependencyUnavailable:
        raise
    except Exception as exc:  # the quantiser raises anything: report it with its text
        raise DependencyUnavailable(
            f"int8 quantisation of {source} failed: {type(exc).__name__}: {exc}. Fix: {FIX}; if it is "
            f"installed, delete {source} so that the float32 model is built again."
        ) from exc
    finally:
        root.removeFilter(quiet)
    say(f"int8 model ready: {out}")
    return out


def _check(exact: Path, quantised: Path) -> float:
    """Smallest cosine between the two models' mean-pooled outputs on a fixed padded batch."""
    import numpy as np
    import onnxruntime as ort

    ids = np.array(
        [
            [101, 2023, 2003, 1037, 3231, 6251, 2055, 7861, 8270, 4667, 4275, 1012, 102],
            [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 102, 0, 0],
            [101, 7592, 2088, 102, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ],
        dtype=np.int64,
    )
    mask = (ids != 0).astype(np.int64)
    vectors = []
    for path in (exact, quantised):
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        names = {i.name for i in session.get_inputs()}
        hidden = session.run(None, {k: v for k, v in feed.items() if k in names})[0]
        pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        vectors.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
    return float(np.min(np.sum(vectors[0] * vectors[1], axis=1)))
