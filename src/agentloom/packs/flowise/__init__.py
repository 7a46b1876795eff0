"""The flowise pack: build Flowise chatflows from a node catalog and templates, at a few tokens per call,
run and test them, and learn from past designs."""

# Each module adds its tools to the one pack object when imported.
from agentloom.packs.flowise import data_tools, learning_tools, run_tools
from agentloom.packs.flowise.tools import pack

__all__ = ["data_tools", "learning_tools", "pack", "run_tools"]
