"""Registry errors in command-line terms: each typed registry error becomes a message that
names the option or argument (``--dimensions``, ``ID``), the problem, the command that fixes
it, and an exit code (2: a wrong argument, 1: refused or missing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloom.cli.model_terms import KINDS, LIST, OPTIONS
from agentloom.embeddings.records import RegistryError


def explain(exc: RegistryError, ctx: Mapping[str, Any]) -> tuple[str, str | None, int]:
    """(message, fix, exit code) for a registry error, in terms of this command's arguments."""
    from agentloom.embeddings.records import RecordNotFoundError, RefusedError

    field, reason, value, info = exc.field or "", exc.reason, exc.value, exc.info
    option = OPTIONS.get(field)
    provider = ctx.get("provider")
    key = info.get("model_key", ctx.get("model_key"))
    model_id = info.get("model_id", value)
    set_default = "`agentloom models set-default ID`"

    if isinstance(exc, RecordNotFoundError):
        if field == "provider":
            known = ", ".join(info.get("known") or []) or "none yet"
            return (
                f"there is no provider {value!r} (known providers: {known}).",
                (
                    f"to create it, add --kind {KINDS} (and --base-url for an openai provider); "
                    "or use one of the known --provider names."
                ),
                1,
            )
        return f"there is no model with id {model_id}.", f"run {LIST} to see the ids.", 1

    if isinstance(exc, RefusedError):
        if reason == "exists":
            mid = info.get("model_id")
            return (
                f"model {value!r} already exists for provider {info.get('provider')!r} (id {mid}).",
                (
                    f"use it as it is (make it the default with `agentloom models set-default {mid}`), or remove it "
                    f"with `agentloom models remove {mid}` and add it again with the new settings."
                ),
                1,
            )
        if reason == "kind_change":
            old, used = info.get("old_kind"), info.get("models")
            return (
                (
                    f"provider {info.get('provider')!r} is a {old} provider with {used} model(s), so it cannot become "
                    f"{value!r}."
                ),
                (
                    f"leave --kind out (or give --kind {old}) to add the model to it, or choose another "
                    f"--provider name for the {value} provider."
                ),
                1,
            )
        if reason == "ambiguous":
            providers, ids = info.get("providers") or [], info.get("ids") or []
            listed = ", ".join(f"{p} (id {i})" for p, i in zip(providers, ids, strict=False))
            return (
                f"model {value!r} exists under several providers: {listed}.",
                (
                    f"make the one you want the default with {set_default}, then run `agentloom models prepare` "
                    "without KEY."
                ),
                1,
            )
        if reason == "is_default" and field == "model_id":
            return (
                f"model {key!r} (id {model_id}) is the default model and cannot be removed.",
                f"make another model the default first with {set_default} (ids in {LIST}), then remove this one.",
                1,
            )
        if reason == "is_default" and field == "enabled":
            return (
                f"model {key!r} (id {model_id}) is the default model and cannot be disabled.",
                f"make another model the default first with {set_default} (ids in {LIST}), then disable this one.",
                1,
            )
        if reason == "is_default":
            return (
                f"model {key!r} (id {model_id}) is the default model, and there must always be one.",
                f"make another model the default with {set_default} (ids in {LIST}).",
                1,
            )
        if reason == "disabled":
            return (
                f"model {key!r} (id {model_id}) is disabled, and the default model must be enabled.",
                f"run `agentloom models enable {model_id}` first, then `agentloom models set-default {model_id}`.",
                1,
            )
        return str(exc), None, 1

    # InvalidFieldError: a wrong argument
    if field == "dimensions":
        return (
            (
                f"--dimensions {value} is invalid: it is the length of the vectors the model returns, "
                "a whole number from 1 to 16384."
            ),
            (
                "give the model's vector size, e.g. --dimensions 384 for all-MiniLM-L6-v2, "
                "--dimensions 1536 for text-embedding-3-small, --dimensions 768 for nomic-embed-text."
            ),
            2,
        )
    if field == "base_url":
        if reason == "missing":
            return (
                f"--base-url is required for an {info.get('kind', 'openai')} provider.",
                "give the API root, e.g. --base-url https://api.openai.com/v1.",
                2,
            )
        if reason == "not_allowed":
            return (
                "--base-url does not apply to a local provider: local models run inside agentloom.",
                "leave --base-url out, or use --kind openai or --kind ollama for a model served over HTTP.",
                2,
            )
        return (
            f"--base-url {value!r} is not an http:// or https:// URL.",
            (
                "give the provider's API root with its scheme, e.g. --base-url https://api.openai.com/v1 "
                "or --base-url http://127.0.0.1:11434."
            ),
            2,
        )
    if field in ("api_key_env", "api_key") and reason == "not_allowed":
        return (
            "--api-key-env does not apply to a local provider: local models need no key.",
            "leave --api-key-env out.",
            2,
        )
    if field == "api_key_env":
        return (
            f"--api-key-env {value!r} is not the name of an environment variable.",
            (
                "give the variable's NAME, not the key itself: export OPENAI_API_KEY=sk-... and pass "
                "--api-key-env OPENAI_API_KEY."
            ),
            2,
        )
    if field == "provider":
        return (
            f"--provider {value!r} is not a valid provider name.",
            "use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, e.g. --provider openai.",
            2,
        )
    if field == "kind":
        return f"--kind {value!r} is not a provider kind.", f"use --kind {KINDS}.", 2
    if field == "model_key":
        if reason == "empty":
            return "KEY is empty.", "give the model's name as its provider knows it, e.g. text-embedding-3-small.", 2
        return (
            f"KEY {value!r} is not a valid model name.",
            "remove leading and trailing spaces; at most 200 characters.",
            2,
        )
    if field in ("config.model_path", "config.timeout") and reason == "not_allowed":
        kind = info.get("kind")
        name = f"provider {provider!r}" if provider else "the provider"
        if field == "config.model_path":
            return (
                f"--model-path applies only to local models, and {name} is an {kind} provider.",
                "leave --model-path out (the provider serves the model), or use a local --provider.",
                2,
            )
        return (
            f"--timeout applies only to models served over HTTP, and {name} is a local provider.",
            "leave --timeout out, or use an openai or ollama --provider.",
            2,
        )
    if field == "config.timeout":
        big = isinstance(value, int | float) and value > 600
        return (
            f"--timeout {value:g} is invalid: it is in seconds, above 0 and at most 600.",
            f"did you mean --timeout {value / 1000:g} (milliseconds given as seconds)?"
            if big
            else "give the request timeout in seconds, e.g. --timeout 30.",
            2,
        )
    if field == "config.model_path":
        return "--model-path is empty.", "give the folder of a sentence-transformers model.", 2
    # What no option of this command sets; phrased for a person all the same.
    if field == "api_key":
        return (
            "the API key is empty.",
            "keep the key in an environment variable and pass its name with --api-key-env.",
            2,
        )
    if field == "enabled" and reason == "default_disabled":
        return (
            f"model {key!r} cannot be added as the default and disabled at once.",
            "add it enabled: the default model must be enabled.",
            2,
        )
    if field == "model_type":
        return f"the model type {value!r} is invalid.", "use a lowercase word such as embedding.", 2
    if field == "config":
        return "the model options are invalid.", "give them as option names with values.", 2
    if field.startswith("config."):
        return "the model option " + str(exc).removeprefix("config."), None, 2
    label = option or "a value"
    return f"{label} is invalid.", None, 2
