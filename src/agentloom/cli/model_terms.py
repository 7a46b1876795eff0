"""How the model commands name things, shared by the commands (models.py) and their error messages
(model_errors.py), so neither imports the other for them."""

from __future__ import annotations

# The registry is not imported here: `agentloom serve` starts without it.
PROVIDER_KINDS = ("local", "openai", "ollama")  # = agentloom.embeddings.records.PROVIDER_KINDS (a test checks)

LIST = "`agentloom models list`"
KINDS = "|".join(PROVIDER_KINDS)
# The registry's argument names, as the user types them on the command line.
OPTIONS = {
    "model_key": "KEY",
    "provider": "--provider",
    "kind": "--kind",
    "dimensions": "--dimensions",
    "base_url": "--base-url",
    "api_key_env": "--api-key-env",
    "api_key": "--api-key-env",
    "config.model_path": "--model-path",
    "config.timeout": "--timeout",
    "model_id": "ID",
}
