"""``.knowledge/config.yaml``: its schema, how it is read, and where each docset's files live.

Example::

    docs_root: .knowledge/docs          # optional; relative to the project root
    template: "..."                     # optional; replaces the default instruction
    docsets:
      - name: react                     # `id` is accepted too
        version: "18.2"
        aliases: [reactjs]
        template: "Look for {keywords} under {local_path}"
      - name: fastapi
        web_sources:
          - type: git_repo
            url: https://github.com/fastapi/fastapi.git
            branch: master              # or `options: {branch: ..., paths: [...]}`
            paths: [docs/en/docs]
      - name: shared
        local_path: /srv/docs/shared    # web sources write only inside the project unless
        allow_outside_project: true     # the docset says so; local-only docsets go anywhere
        web_sources: [...]

``docsets`` may also be a mapping from name to settings. Unknown keys are ignored.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from agentloom.core.errors import ConfigError
from agentloom.packs.docs.names import name_problem
from agentloom.packs.docs.urls import url_problem

KNOWLEDGE_DIR = ".knowledge"
CONFIG_NAME = "config.yaml"
DEFAULT_DOCS_ROOT = ".knowledge/docs"
WEB_DOCSETS_DIR = ".knowledge/docsets"
SOURCE_TYPES = ("git_repo",)
DEFAULT_TEMPLATE = (
    "Search for '{keywords}' in folder {local_path}. Use your normal text search tools to do this. "
    "If the search results don't help you, try to find '{generalized_keywords}'. "
    "If this still doesn't help, ask the user to rephrase it."
)


_AS_WRITTEN = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")


@functools.cache
def _loader() -> type:
    """A safe loader that keeps numbers and dates as written: ``version: 18.10`` stays "18.10", never 18.1, and
    ``version: 2024-02-30`` stays text instead of failing as a date. (Built on first use: importing yaml costs
    20 ms of the server's start.)"""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: about 10x faster
    resolvers = {
        first: [(tag, rx) for tag, rx in listed if tag not in _AS_WRITTEN]
        for first, listed in base.yaml_implicit_resolvers.items()
    }
    return type("VersionKeepingLoader", (base,), {"yaml_implicit_resolvers": resolvers})


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class GitRepoSource(_Model):
    type: str
    url: str
    branch: str | None = None
    paths: tuple[str, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _flatten_options(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("options"), dict):
            data = {**data["options"], **{k: v for k, v in data.items() if k != "options"}}
        return data

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in SOURCE_TYPES:
            raise ValueError(f"unknown source type {value!r}; supported: {', '.join(SOURCE_TYPES)}")
        return value

    @field_validator("url")
    @classmethod
    def _safe_url(cls, value: str) -> str:
        problem = url_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("branch")
    @classmethod
    def _plain_branch(cls, value: str | None) -> str | None:
        if value is not None and (not value or value.startswith("-") or any(c.isspace() for c in value)):
            raise ValueError(f"{value!r} is not a branch name")
        return value

    @field_validator("paths")
    @classmethod
    def _relative_paths(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        cleaned = []
        for path in value:
            pure = PurePosixPath(path.replace("\\", "/"))
            if not path.strip() or pure.is_absolute() or ".." in pure.parts:
                raise ValueError(f"{path!r} must be a path inside the repository, like docs/ or README.md")
            cleaned.append(pure.as_posix())
        return tuple(cleaned) or None


class DocsetConfig(_Model):
    name: str
    version: str | None = None
    aliases: tuple[str, ...] = ()
    description: str | None = None
    template: str | None = None
    local_path: str | None = None
    allow_outside_project: bool = False  # web sources may write to a local_path outside the project
    web_sources: tuple[GitRepoSource, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _id_is_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "id" in data:
            title = data.get("name")
            data = {**data, "name": data["id"]}
            if title is not None and "description" not in data:
                data["description"] = str(title)
        return data

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        problem = name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError(f'must be text; quote it, for example version: "{value}"')
        return value or None

    @field_validator("aliases", mode="before")
    @classmethod
    def _alias_list(cls, value: Any) -> Any:
        if value is None:
            return ()
        return [value] if isinstance(value, str) else value

    @field_validator("aliases")
    @classmethod
    def _valid_aliases(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for alias in value:
            problem = name_problem(alias)
            if problem:
                raise ValueError(f"alias {problem}")
        return value

    @field_validator("web_sources", mode="before")
    @classmethod
    def _source_list(cls, value: Any) -> Any:
        return () if value is None else value


class KnowledgeConfig(_Model):
    docs_root: str = DEFAULT_DOCS_ROOT
    template: str | None = None
    docsets: tuple[DocsetConfig, ...]

    @field_validator("docs_root", mode="before")
    @classmethod
    def _default_root(cls, value: Any) -> Any:
        return value or DEFAULT_DOCS_ROOT

    @field_validator("docsets", mode="before")
    @classmethod
    def _docset_list(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, dict):  # name -> settings
            return [
                {"name": name, **(body or {})} if isinstance(body or {}, dict) else body for name, body in value.items()
            ]
        return value


@dataclass(frozen=True)
class Docset:
    """A configured docset with its paths worked out."""

    name: str
    version: str | None
    aliases: tuple[str, ...]
    description: str | None
    template: str
    path: Path  # absolute folder holding the files
    web_sources: tuple[GitRepoSource, ...]
    allow_outside_project: bool = False  # web sources may write outside the project folder

    @property
    def local_path(self) -> str:
        """The folder as reported to agents: forward slashes and a trailing slash."""
        return self.path.as_posix().rstrip("/") + "/"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "aliases": list(self.aliases),
            "local_path": self.local_path,
            "description": self.description,
            "web_sources": [s.url for s in self.web_sources],
        }


@dataclass(frozen=True)
class Project:
    """A loaded ``.knowledge/config.yaml`` and everything derived from it."""

    config_path: Path
    root: Path  # the folder that contains .knowledge
    docs_root: Path
    docsets: tuple[Docset, ...]
    lookup: dict[str, Docset] = field(repr=False)  # names and aliases

    @property
    def knowledge_dir(self) -> Path:
        return self.config_path.parent

    def get(self, name: str) -> Docset | None:
        return self.lookup.get(name)

    def available(self) -> str:
        if not self.docsets:
            return f"none are configured; add one under `docsets:` in {self.config_path}"
        parts = [d.name + (f" (aliases: {', '.join(d.aliases)})" if d.aliases else "") for d in self.docsets]
        return ", ".join(parts)


def load_project(config_path: Path, text: str | None = None) -> Project:
    """Parse and validate a config file; every problem becomes a ConfigError naming file, line or key."""
    config_path = config_path.absolute()
    if text is None:
        text = read_config_text(config_path)
    import yaml

    try:
        data = yaml.load(text, Loader=_loader())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ConfigError(
            f"{config_path}: YAML syntax error at {where}: {exc.problem or exc}. Fix the file; "
            "the change is picked up on the next call"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{config_path}: YAML syntax error: {exc}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # a `!!int x`-style tag PyYAML cannot convert
        raise ConfigError(
            f"{config_path}: a tagged value cannot be converted ({exc}); remove the `!!` tag or quote the value"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{config_path}: the file must be a mapping with a `docsets:` section, for example\n{_EXAMPLE}"
        )
    if "docsets" not in data:
        raise ConfigError(f"{config_path}: the required `docsets:` section is missing; add it, for example\n{_EXAMPLE}")
    try:
        config = KnowledgeConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{config_path}: invalid configuration:\n{_describe(exc)}") from None
    return _resolve(config_path, config)


def read_config_text(config_path: Path) -> str:
    try:
        return config_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{config_path}: not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(
            f"{config_path}: cannot read the configuration file ({exc.strerror or exc}); "
            "check that it exists and that this user may read it"
        ) from None


_EXAMPLE = 'docsets:\n  - name: react\n    version: "18.2"\n    aliases: [reactjs]'


def _resolve(config_path: Path, config: KnowledgeConfig) -> Project:
    root = config_path.parent.parent
    docs_root = _under(root, config.docs_root)
    default_template = config.template or DEFAULT_TEMPLATE
    docsets: list[Docset] = []
    lookup: dict[str, Docset] = {}
    for i, entry in enumerate(config.docsets):
        if entry.local_path:
            path = _under(root, entry.local_path)
        elif entry.web_sources:
            path = root / WEB_DOCSETS_DIR / entry.name
        else:
            folder = f"{entry.name}-{entry.version}" if entry.version else entry.name
            path = docs_root / folder
        docset = Docset(
            entry.name,
            entry.version,
            entry.aliases,
            entry.description,
            entry.template or default_template,
            path,
            entry.web_sources,
            entry.allow_outside_project,
        )
        for key in (entry.name, *entry.aliases):
            if key in lookup:
                raise ConfigError(
                    f"{config_path}: docsets[{i}] ({entry.name}): the name {key!r} is already used by docset "
                    f"{lookup[key].name!r}; names and aliases must be unique"
                )
            lookup[key] = docset
        docsets.append(docset)
    return Project(config_path, root, docs_root, tuple(docsets), lookup)


def _under(root: Path, configured: str) -> Path:
    path = Path(configured.replace("\\", "/")).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else root / path))  # symlinks kept


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required"
        lines.append(f"  - {loc}: {message}")
    return "\n".join(lines)
