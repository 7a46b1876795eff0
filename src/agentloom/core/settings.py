"""One settings model for the whole server.

Sources, highest priority first: explicit arguments (CLI flags), ``AGENTLOOM_*``
environment variables, the TOML file named by ``AGENTLOOM_CONFIG_FILE`` (or
``./agentloom.toml`` when it exists), then defaults. Nested keys use ``__`` in the
environment: ``AGENTLOOM_BREAKERS__FAILURE_THRESHOLD=5``.

The data directory, unless one of those sources sets it, is the project's ``.agentloom``
when the working directory has one, else the user data directory (``~/.local/share/agentloom``
on Linux): desktop MCP clients start servers in ``/``, where ``./.agentloom`` is no place for data.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field, PrivateAttr, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

CONFIG_FILE_ENV = "AGENTLOOM_CONFIG_FILE"
DEFAULT_CONFIG_FILE = Path("agentloom.toml")
PROJECT_DATA_DIR = Path(".agentloom")
DATA_DIR_ENV = "AGENTLOOM_DATA_DIR"

T = TypeVar("T", bound=BaseModel)


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentloom"


def _default_data_dir() -> Path:
    """The project's ``.agentloom`` when the working directory has one, else the user data directory."""
    if PROJECT_DATA_DIR.is_dir():
        return PROJECT_DATA_DIR.absolute()
    from platformdirs import user_data_dir

    return Path(user_data_dir("agentloom", appauthor=False))


class BreakerSettings(BaseModel):
    failure_threshold: int = Field(3, ge=1, description="Consecutive dependency failures that open a breaker.")
    reset_timeout_seconds: float = Field(300.0, gt=0, description="How long a breaker stays open before one trial.")


class EmbeddingSettings(BaseModel):
    query_cache_size: int = Field(2048, ge=0, description="Query embeddings kept in the LRU cache (0 disables).")
    config_ttl_seconds: float = Field(300.0, ge=0, description="How long the model configuration is cached.")
    batch_size: int = Field(32, ge=1, description="Texts per batch sent to a provider.")
    threads: int = Field(
        0,
        ge=0,
        description="Threads per local model: onnxruntime intra-op threads (0: one per core; for the packaged "
        "multilingual-e5-small at most two, which sleep instead of spinning; USE always uses one).",
    )
    max_tokens: int = Field(256, ge=8, le=512, description="Input limit of the local model, in its own tokens.")


def folder_list(value: Any) -> Any:
    """A settings value naming folders: a JSON list ('["/srv/docs", "~/notes"]') or a PATH-like
    string ('/srv/docs:~/notes'); each becomes an expanded Path."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise ValueError(f"not a JSON list of folders: {value!r}") from None
        else:
            value = [part for part in text.split(os.pathsep) if part.strip()]
    if isinstance(value, list):
        return [Path(v).expanduser() if isinstance(v, (str, Path)) else v for v in value]
    return value


def _split_names(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="AGENTLOOM_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where every pack keeps its data (default: ./.agentloom when it exists, else the user data "
        "directory).",
    )
    cache_dir: Path = Field(default_factory=_default_cache_dir, description="Shared caches (the ONNX model).")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    packs: Annotated[list[str] | None, NoDecode] = Field(
        None, description="Packs to enable (comma-separated); unset enables every installed pack."
    )
    disabled_packs: Annotated[list[str], NoDecode] = Field(default_factory=list, description="Packs never loaded.")
    tools: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description="Tools to list (comma-separated names or globs, e.g. vector_search,skills_*); unset lists every "
        "tool of the enabled packs. Every tools/list costs an agent tokens in every conversation.",
    )
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    breakers: BreakerSettings = Field(default_factory=BreakerSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    pack_settings: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-pack tables, `[pack_settings.<name>]` in the TOML file."
    )

    _split = field_validator("packs", "disabled_packs", "tools", mode="before")(_split_names)
    _data_dir_origin: str = PrivateAttr("")

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        self._data_dir_origin = self._find_data_dir_origin(values.get("data_dir") is not None)

    @property
    def data_dir_origin(self) -> str:
        """Why :attr:`data_dir` is what it is, in the user's terms: the setting that chose it, or which default
        applies (``agentloom doctor`` and the ``health`` tool show it)."""
        return self._data_dir_origin

    def _find_data_dir_origin(self, given: bool) -> str:
        if given:  # only the command line passes it as an argument
            return "set by --data-dir"
        if "data_dir" in self.model_fields_set:
            if any(key.upper() == DATA_DIR_ENV for key in os.environ):
                return f"set by {DATA_DIR_ENV}"
            return f"set by data_dir in {os.environ.get(CONFIG_FILE_ENV) or DEFAULT_CONFIG_FILE}"
        if self.data_dir == PROJECT_DATA_DIR.absolute():
            return "the project's .agentloom, found in the working directory"
        return (
            f"the user data directory, the default when {DATA_DIR_ENV} is unset and the working directory "
            "has no .agentloom"
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(CONFIG_FILE_ENV)
        if config_file:
            path = Path(config_file)
            if not path.is_file():
                raise FileNotFoundError(
                    f"{CONFIG_FILE_ENV}={config_file}: no such file. Create it or unset the variable."
                )
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        elif DEFAULT_CONFIG_FILE.is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=DEFAULT_CONFIG_FILE))
        return tuple(sources)

    def pack_enabled(self, name: str) -> bool:
        if name in self.disabled_packs:
            return False
        return self.packs is None or name in self.packs

    def tool_enabled(self, name: str) -> bool:
        return self.tools is None or any(fnmatch.fnmatchcase(name, pattern) for pattern in self.tools)

    def for_pack(self, name: str, model: type[T]) -> T:
        """A pack's own settings: its TOML table overlaid with ``AGENTLOOM_<NAME>__<KEY>`` variables.

        A bad value raises :class:`ConfigError` naming the variable and the TOML key, never a pydantic
        dump: packs' setup and their command lines both read their settings here."""
        from pydantic import ValidationError

        from agentloom.core.errors import ConfigError

        values: dict[str, Any] = dict(self.pack_settings.get(name, {}))
        prefix = f"AGENTLOOM_{name.upper()}__"
        for key, value in os.environ.items():
            if key.startswith(prefix):
                values[key[len(prefix) :].lower()] = value
        try:
            return model.model_validate(values)
        except ValidationError as exc:
            problems = []
            for item in exc.errors(include_url=False):
                key = ".".join(str(p) for p in item["loc"])
                variable = f"{prefix}{key.upper().replace('.', '__')}"
                message = str(item["msg"]).removeprefix("Value error, ")
                problems.append(f"{variable} ({key} in [pack_settings.{name}]): {message} (got {item.get('input')!r})")
            raise ConfigError(f"{name} settings: " + "; ".join(problems)) from None

    def ensure_data_dir(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self.data_dir
