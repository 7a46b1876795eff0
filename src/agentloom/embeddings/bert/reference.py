"""The BERT encoder written out in numpy, step by step as Hugging Face's ``BertModel`` does it.

Slow and plain on purpose: it is the independent side of the check every built graph must pass
(:func:`agentloom.embeddings.bert.build.build_onnx`) and of the tests. Padded positions get an
additive -10000 on their attention scores, as in BERT.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from agentloom.embeddings.bert.config import BertConfig

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed: np.ndarray = (x - mean) / np.sqrt(var + eps) * gamma + beta
    return normed


def _gelu(x: np.ndarray) -> np.ndarray:
    activated: np.ndarray = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    return activated


def forward(
    config: BertConfig, weights: Mapping[str, np.ndarray], ids: np.ndarray, mask: np.ndarray, types: np.ndarray
) -> np.ndarray:
    """last_hidden_state (batch, sequence, hidden) in float64."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    batch, seq = ids.shape
    heads, size, eps = config.num_attention_heads, config.head_size, config.layer_norm_eps
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][np.arange(seq)][None]
        + w["embeddings.token_type_embeddings.weight"][types]
    )
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    score_bias = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0

    def dense(v: np.ndarray, key: str) -> np.ndarray:
        return v @ w[f"{key}.weight"].T + w[f"{key}.bias"]

    def split(v: np.ndarray) -> np.ndarray:
        return v.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

    for n in range(config.num_hidden_layers):
        p = f"encoder.layer.{n}."
        q, k, v = (split(dense(x, f"{p}attention.self.{proj}")) for proj in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + score_bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, config.hidden_size)
        x = _layer_norm(
            dense(context, f"{p}attention.output.dense") + x,
            w[f"{p}attention.output.LayerNorm.weight"],
            w[f"{p}attention.output.LayerNorm.bias"],
            eps,
        )
        inner = _gelu(dense(x, f"{p}intermediate.dense"))
        x = _layer_norm(
            dense(inner, f"{p}output.dense") + x, w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"], eps
        )
    return x
