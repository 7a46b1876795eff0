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

``word_vectors=True`` makes a graph without the word embedding table (for a vocabulary too big
to hold as float32, such as multilingual-e5-small's 250,037 rows): its inputs are the rows the
caller looked up, ``word_vectors`` (batch, sequence, hidden), and ``attention_mask``; position
(from 0) and token type 0 are added in the graph, then LayerNormalization.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentloom.embeddings.bert.config import BertConfig

if TYPE_CHECKING:
    import numpy as np
    import onnx

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
VECTOR_INPUT_NAMES = ("word_vectors", "attention_mask")
OUTPUT_NAME = "last_hidden_state"
OPSET = 17
# IR 8 is what opset 17 needs; onnx writes its newest IR by default, which onnxruntime may not read yet.
IR_VERSION = 8
MS = "com.microsoft"


def build_graph(
    config: BertConfig, weights: Mapping[str, np.ndarray], *, name: str = "bert", word_vectors: bool = False
) -> onnx.ModelProto:
    """The encoder as an ONNX model; ``weights`` must hold exactly ``config.shapes()`` (see ``weights.check``),
    less the word embedding table when ``word_vectors``."""
    import numpy as np
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
    inputs = VECTOR_INPUT_NAMES if word_vectors else INPUT_NAMES
    int_inputs = [i for i in inputs if i != "word_vectors"]
    nodes = [helper.make_node("Cast", [src], [f"{src}_int32"], to=TensorProto.INT32) for src in int_inputs]
    if word_vectors:
        # Rows 0..sequence-1 of (position + token type 0) added to the given word rows, then LayerNorm.
        table = weights["embeddings.position_embeddings.weight"] + weights["embeddings.token_type_embeddings.weight"][0]
        inits.append(numpy_helper.from_array(np.zeros(1, dtype=np.int64), "zero"))
        nodes += [
            helper.make_node("Shape", ["word_vectors"], ["sequence_length"], start=1, end=2),
            helper.make_node(
                "Slice", [const("embeddings.position_type", table), "zero", "sequence_length"], ["positions"]
            ),
            helper.make_node("Add", ["word_vectors", "positions"], ["embeddings.sum"]),
            helper.make_node(
                "LayerNormalization",
                ["embeddings.sum", w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias")],
                ["embeddings"],
                axis=-1,
                epsilon=eps,
            ),
        ]
        mask = "attention_mask_int32"  # Attention also takes the raw (batch, sequence) 0/1 mask
    else:
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
        mask = "mask_index"
    hidden = "embeddings"
    for n in range(config.num_hidden_layers):
        p = f"encoder.layer.{n}."
        qkv = [f"{p}attention.self.{proj}" for proj in ("query", "key", "value")]
        qkv_weight = const(f"{p}attention.qkv.weight", np.concatenate([weights[f"{k}.weight"].T for k in qkv], axis=1))
        qkv_bias = const(f"{p}attention.qkv.bias", np.concatenate([weights[f"{k}.bias"] for k in qkv]))
        nodes += [
            helper.make_node(
                "Attention",
                [hidden, qkv_weight, qkv_bias, mask],
                [f"{p}context"],
                domain=MS,
                num_heads=config.num_attention_heads,
            ),
            helper.make_node(
                "MatMul", [f"{p}context", linear(f"{p}attention.output.dense.weight")], [f"{p}attention.dense"]
            ),
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
            helper.make_node(
                "MatMul", [f"{p}attention.out", linear(f"{p}intermediate.dense.weight")], [f"{p}intermediate.dense"]
            ),
            helper.make_node(
                "BiasGelu",
                [f"{p}intermediate.dense", w(f"{p}intermediate.dense.bias")],
                [f"{p}intermediate.out"],
                domain=MS,
            ),
            helper.make_node(
                "MatMul", [f"{p}intermediate.out", linear(f"{p}output.dense.weight")], [f"{p}output.dense"]
            ),
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
        [
            helper.make_tensor_value_info(i, TensorProto.FLOAT, [*dims, config.hidden_size])
            if i == "word_vectors"
            else helper.make_tensor_value_info(i, TensorProto.INT64, dims)
            for i in inputs
        ],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [*dims, config.hidden_size])],
        initializer=inits,
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
        producer_name="agentloom",
        ir_version=IR_VERSION,
    )
