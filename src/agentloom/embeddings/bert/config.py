"""The shape of a BERT encoder and the names of the weights it needs.

Names follow Hugging Face's ``BertModel`` without its prefix (``embeddings.word_embeddings.weight``,
``encoder.layer.0.attention.self.query.weight``, ...); linear weights are ``(out, in)`` as
torch stores them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentloom.core.errors import ConfigError

# Activations the graph knows: BERT's exact (erf) GELU. tanh approximations would change the vectors.
GELU_NAMES = ("gelu",)


@dataclass(frozen=True)
class BertConfig:
    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every weight the encoder needs, by name, with its shape."""
        h, i = self.hidden_size, self.intermediate_size
        out: dict[str, tuple[int, ...]] = {
            "embeddings.word_embeddings.weight": (self.vocab_size, h),
            "embeddings.position_embeddings.weight": (self.max_position_embeddings, h),
            "embeddings.token_type_embeddings.weight": (self.type_vocab_size, h),
            "embeddings.LayerNorm.weight": (h,),
            "embeddings.LayerNorm.bias": (h,),
        }
        for n in range(self.num_hidden_layers):
            p = f"encoder.layer.{n}."
            for proj in ("query", "key", "value"):
                out[f"{p}attention.self.{proj}.weight"] = (h, h)
                out[f"{p}attention.self.{proj}.bias"] = (h,)
            out.update(
                {
                    f"{p}attention.output.dense.weight": (h, h),
                    f"{p}attention.output.dense.bias": (h,),
                    f"{p}attention.output.LayerNorm.weight": (h,),
                    f"{p}attention.output.LayerNorm.bias": (h,),
                    f"{p}intermediate.dense.weight": (i, h),
                    f"{p}intermediate.dense.bias": (i,),
                    f"{p}output.dense.weight": (h, i),
                    f"{p}output.dense.bias": (h,),
                    f"{p}output.LayerNorm.weight": (h,),
                    f"{p}output.LayerNorm.bias": (h,),
                }
            )
        return out

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        """Read a Hugging Face ``config.json``; anything but a BERT encoder with exact GELU is refused."""
        if not path.is_file():
            raise ConfigError(
                f"model folder {path.parent} has no config.json: point config.model_path at a complete "
                "sentence-transformers folder."
            )
        try:
            raw: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{path} cannot be read as JSON ({exc}): the model folder needs its config.json."
            ) from exc
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{path} is not a JSON object: the model folder needs a Hugging Face config.json.")
        kind = raw.get("model_type")
        if kind != "bert":
            raise ConfigError(
                f"{path} describes a {kind!r} model; local models must be BERT encoders (model_type 'bert', "
                "such as all-MiniLM-L6-v2 or bge-small-en-v1.5). Fix: use an OpenAI-compatible or Ollama "
                "provider for other architectures."
            )
        act = raw.get("hidden_act", "gelu")
        if act not in GELU_NAMES:
            raise ConfigError(f"{path} sets hidden_act {act!r}; local BERT models must use 'gelu'.")
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(
                f"{path} sets position_embedding_type {raw['position_embedding_type']!r}; only 'absolute' is supported."
            )
        try:
            config = cls(
                hidden_size=int(raw["hidden_size"]),
                num_attention_heads=int(raw["num_attention_heads"]),
                num_hidden_layers=int(raw["num_hidden_layers"]),
                intermediate_size=int(raw["intermediate_size"]),
                vocab_size=int(raw["vocab_size"]),
                max_position_embeddings=int(raw.get("max_position_embeddings", 512)),
                type_vocab_size=int(raw.get("type_vocab_size", 2)),
                layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path} lacks a usable {exc} for a BERT encoder.") from exc
        if config.hidden_size % config.num_attention_heads:
            raise ConfigError(f"{path}: hidden_size {config.hidden_size} is not a multiple of num_attention_heads.")
        return config


# sentence-transformers/all-MiniLM-L6-v2 (its config.json).
MINILM_L6 = BertConfig(
    hidden_size=384,
    num_attention_heads=12,
    num_hidden_layers=6,
    intermediate_size=1536,
    vocab_size=30522,
    max_position_embeddings=512,
    type_vocab_size=2,
    layer_norm_eps=1e-12,
)
