"""A BERT encoder as one ONNX graph of onnxruntime's fused operators.

This is the graph onnxruntime's own BERT optimiser makes of a torch export (measured: the same
operators, in the same order), written directly so that no torch export is needed::

    Cast x3 (int64 inputs to int32)
    EmbedLayerNormalization            word + position + token type, LayerNorm; the mask's lengths
    per layer:  Attention              q, k, v in one (hidden, 3*hidden) MatMul, heads, softmax
                MatMul, SkipLayerNormalization (+ attention output bias, + residual)
                MatMul, BiasGelu       (exact erf GELU)
                MatMul, SkipLayerNormalization
    -> last_hidden_state (batch, sequence, hidden)

The operators live in the ``com.microsoft`` domain, so the file runs on onnxruntime only
(which is what runs it). Attention reads the mask as one length per row: rows must be padded
on the right, as the local provider does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentloom.embeddings.bert.config import BertConfig

if TYPE_CHECKING:
    import numpy as np
    import onnx

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
OPSET = 17
# IR 8 is what opset 17 needs; onnx writes its newest IR by default, which onnxruntime may not read yet.
IR_VERSION = 8
MS = "com.microsoft"


def build_graph(config: BertConfig, weights: Mapping[str, np.ndarray], *, name: str = "bert") -> onnx.ModelProto:
    """The encoder as an ONNX model; ``weights`` must hold exactly ``config.shapes()`` (see ``weights.check``)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits: list[onnx.TensorProto] = []

    def const(key: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=np.float32), key))
        return key

    def w(key: str) -> str:
        return const(key, weights[key])

    def linear(key: str) -> str:
        """A linear layer's weight as MatMul's right operand: (in, out)."""
        return const(key, weights[key].T)

    eps = config.layer_norm_eps
    nodes = [
        helper.make_node("Cast", [src], [f"{src}_int32"], to=TensorProto.INT32) for src in INPUT_NAMES
    ]
    nodes.append(
        helper.make_node(
            "EmbedLayerNormalization",
            [
                "input_ids_int32",
                "token_type_ids_int32",
                w("embeddings.word_embeddings.weight"),
                w("embeddings.position_embeddings.weight"),
                w("embeddings.token_type_embeddings.weight"),
                w("embeddings.LayerNorm.weight"),
                w("embeddings.LayerNorm.bias"),
                "attention_mask_int32",
            ],
            ["embeddings", "mask_index"],
            domain=MS,
            epsilon=eps,
        )
    )
    hidden = "embeddings"
    for n in range(config.num_hidden_layers):
        p = f"encoder.layer.{n}."
        qkv = [f"{p}attention.self.{proj}" for proj in ("query", "key", "value")]
        qkv_weight = const(f"{p}attention.qkv.weight", np.concatenate([weights[f"{k}.weight"].T for k in qkv], axis=1))
        qkv_bias = const(f"{p}attention.qkv.bias", np.concatenate([weights[f"{k}.bias"] for k in qkv]))
        nodes += [
            helper.make_node(
                "Attention", [hidden, qkv_weight, qkv_bias, "mask_index"], [f"{p}context"],
                domain=MS, num_heads=config.num_attention_heads,
            ),
            helper.make_node("MatMul", [f"{p}context", linear(f"{p}attention.output.dense.weight")], [f"{p}attention.dense"]),
            helper.make_node(
                "SkipLayerNormalization",
                [
                    f"{p}attention.dense",
                    hidden,
                    w(f"{p}attention.output.LayerNorm.weight"),
                    w(f"{p}attention.output.LayerNorm.bias"),
                    w(f"{p}attention.output.dense.bias"),
                ],
                [f"{p}attention.out"],
                domain=MS,
                epsilon=eps,
            ),
            helper.make_node("MatMul", [f"{p}attention.out", linear(f"{p}intermediate.dense.weight")], [f"{p}intermediate.dense"]),
            helper.make_node(
                "BiasGelu", [f"{p}intermediate.dense", w(f"{p}intermediate.dense.bias")], [f"{p}intermediate.out"], domain=MS
            ),
            helper.make_node("MatMul", [f"{p}intermediate.out", linear(f"{p}output.dense.weight")], [f"{p}output.dense"]),
        ]
        out = OUTPUT_NAME if n == config.num_hidden_layers - 1 else f"{p}out"
        nodes.append(
            helper.make_node(
                "SkipLayerNormalization",
                [
                    f"{p}output.dense",
                    f"{p}attention.out",
                    w(f"{p}output.LayerNorm.weight"),
                    w(f"{p}output.LayerNorm.bias"),
                    w(f"{p}output.dense.bias"),
                ],
                [out],
                domain=MS,
                epsilon=eps,
            )
        )
        hidden = out

    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(i, TensorProto.INT64, dims) for i in INPUT_NAMES],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [*dims, config.hidden_size])],
        initializer=inits,
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
        producer_name="agentloom",
        ir_version=IR_VERSION,
    )
