"""Configuration errors in the user's terms: which flag, environment variable or TOML key
holds the bad value, what it must be, and how to fix it."""

from __future__ import annotations

import os
import re
import types
import typing
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from agentloom.core.settings import CONFIG_FILE_ENV, DEFAULT_CONFIG_FILE, Settings

ENV_PREFIX = "AGENTLOOM_"
# Settings fields that a command line flag can set, and the flag's name.
CLI_OPTIONS = {
    "data_dir": "--data-dir",
    "packs": "--packs",
    "disabled_packs": "--disable",
    "host": "--host",
    "port": "--port",
}


def config_file_name() -> str:
    return os.environ.get(CONFIG_FILE_ENV) or str(DEFAULT_CONFIG_FILE)


def _config_file_values() -> dict[str, Any]:
    import tomllib

    named = os.environ.get(CONFIG_FILE_ENV)
    path = Path(named) if named else DEFAULT_CONFIG_FILE
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):
        return {}


def _find_env(parts: Sequence[str]) -> tuple[str, str, int] | None:
    """The environment variable that set ``parts`` (or one of its parents, as JSON): name, value, depth."""
    by_upper = {key.upper(): (key, value) for key, value in os.environ.items()}
    for depth in range(len(parts), 0, -1):
        wanted = ENV_PREFIX + "__".join(parts[:depth]).upper()
        if wanted in by_upper:
            key, value = by_upper[wanted]
            return key, value, depth
    return None


def _in_toml(values: Mapping[str, Any], parts: Sequence[str]) -> bool:
    node: Any = values
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _field_info(parts: Sequence[str]) -> Any:
    """The pydantic field for a settings path, or None."""
    from pydantic import BaseModel

    model: Any = Settings
    info = None
    for part in parts:
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        info = model.model_fields[part]
        model = info.annotation
    return info


def _bounds(metadata: Sequence[Any]) -> str:
    """A field's numeric constraints in words: 'from 1 to 65535', 'above 0', 'at least 1'."""
    found = {
        name: getattr(m, name)
        for m in metadata
        for name in ("ge", "gt", "le", "lt")
        if getattr(m, name, None) is not None
    }
    if "ge" in found and "le" in found:
        return f"from {found['ge']} to {found['le']}"
    low = f"at least {found['ge']}" if "ge" in found else f"above {found['gt']}" if "gt" in found else ""
    high = f"at most {found['le']}" if "le" in found else f"below {found['lt']}" if "lt" in found else ""
    words = " and ".join(part for part in (low, high) if part)
    return f"of {words}" if words.startswith("at ") else words


def _expected(info: Any) -> str | None:
    """What a field accepts, in words: 'a whole number from 1 to 65535', 'one of DEBUG, INFO'..."""
    if info is None:
        return None
    annotation = info.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = members[0] if len(members) == 1 else annotation
    if typing.get_origin(annotation) is Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(str(m.value) for m in annotation)
    bounds = _bounds(info.metadata)
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "a whole number" + (f" {bounds}" if bounds else "")
    if annotation is float:
        return "a number" + (f" {bounds}" if bounds else "")
    if annotation is Path:
        return "a path"
    if annotation is str:
        return "text"
    if typing.get_origin(annotation) is list:
        return "a list of names (comma-separated in an environment variable)"
    if typing.get_origin(annotation) is dict or isinstance(annotation, type):
        return "a table of settings"
    return None


def _default(info: Any) -> Any:
    from pydantic_core import PydanticUndefined

    if info is None or info.default is PydanticUndefined or info.default is None:
        return None
    default = info.default
    return default if isinstance(default, str | int | float | bool) and not isinstance(default, Enum) else None


def _problem(error: Mapping[str, Any], info: Any) -> str:
    """The problem, phrased as a requirement when the field's type says what it accepts."""
    expected = _expected(info)
    kind = error.get("type", "")
    if expected and kind not in ("missing", "extra_forbidden"):
        return f"must be {expected}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "must be a table of settings"
    message = str(error.get("msg") or "is invalid")
    message = re.sub(r"^(Input should be|Value error,)\s*", "", message)
    return f"must be {message[0].lower()}{message[1:]}" if message else "is invalid"


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def describe(error: Mapping[str, Any], given: Mapping[str, Any]) -> tuple[str, str | None]:
    """One validation error as (problem, fix), naming the flag, variable or TOML key at fault."""
    loc = tuple(error.get("loc", ()))
    parts: list[str] = []
    for part in loc:
        if not isinstance(part, str):
            break
        parts.append(part)
    dotted = ".".join(parts) + "".join(f"[{p}]" for p in loc[len(parts) :]) or "the configuration"
    info = _field_info(parts) if len(parts) == len(loc) else None
    problem = _problem(error, info)
    default = _default(info)
    value = error.get("input")

    # 1. a command-line flag
    if parts and parts[0] in given and parts[0] in CLI_OPTIONS:
        option = CLI_OPTIONS[parts[0]]
        fix = f"pass a valid {option}" + (f", e.g. {option} {default}" if default is not None else "")
        return f"{option} {_fmt(value)} is not valid: {dotted} {problem}.", fix + ", or leave it out."

    # 2. an environment variable
    found = _find_env(parts) if parts else None
    if found is not None:
        name, raw, depth = found
        if problem == "must be a table of settings":
            problem = "must be a JSON object (a table of settings)"
        if depth == len(parts):
            example = f" (e.g. {name}={default})" if default is not None else ""
            return (
                f"{name}={raw!r} is not valid: {dotted} {problem}.",
                f"set {name} to a valid value{example}, or unset it to use the default.",
            )
        return (
            f"{name} sets {dotted} to {_fmt(value)}, which is not valid: it {problem}.",
            f"correct the JSON in {name}, or unset it and use {ENV_PREFIX}{'__'.join(parts).upper()} instead.",
        )

    # 3. the TOML file
    if parts and _in_toml(_config_file_values(), parts):
        file = config_file_name()
        key, table = parts[-1], ".".join(parts[:-1])
        where = f"{key} in the [{table}] table of {file}" if table else f"{key} in {file}"
        example = f" (e.g. {key} = {_toml_value(default)})" if default is not None else ""
        return (
            f"{file}: {dotted} = {_toml_value(value)} is not valid: it {problem}.",
            f"change {where} to a valid value{example}, or delete the line to use the default.",
        )

    # 4. somewhere else (a value computed from the environment, for instance)
    return (
        f"the setting {dotted} ({_fmt(value)}) is not valid: it {problem}.",
        f"check {ENV_PREFIX}{'__'.join(parts).upper() or '*'} and the configuration file {config_file_name()}.",
    )


def describe_unparsable(exc: Exception) -> tuple[str, str | None]:
    """A complex setting (a table) given as an environment variable that is not valid JSON."""
    match = re.search(r'field "([^"]+)"', str(exc))
    field = match.group(1) if match else None
    found = _find_env([field]) if field is not None else None
    if field is None or found is None:
        return f"the configuration could not be read: {exc}.", None
    name = found[0]
    info = _field_info([field])
    keys = list(getattr(info.annotation, "model_fields", {})) if info is not None else []
    per_key = f" (e.g. {name}__{keys[0].upper()}=...)" if keys else ""
    return (
        f"{name} is not valid JSON: {field} is a table of settings, so this variable must hold a JSON object.",
        (
            f"set one key per variable instead{per_key}, give a JSON object such as {name}='{{\"key\": value}}', "
            f"or unset {name}."
        ),
    )
