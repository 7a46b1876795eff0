"""The flowise pack: build Flowise chatflows from a node catalog and templates, at a few tokens per call."""

from agentloom.packs.flowise.tools import pack

__all__ = ["pack"]
