"""The flowise pack: build Flowise chatflows from a node catalog and templates, at a few tokens per call,
and learn from past designs."""

# learning_tools adds its tools to tools.pack: importing the pack from there loads both modules.
from agentloom.packs.flowise.learning_tools import pack

__all__ = ["pack"]
