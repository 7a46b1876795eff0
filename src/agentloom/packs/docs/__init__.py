"""The docs pack: documentation navigation from ``.knowledge/config.yaml``, and its CLI."""

from agentloom.packs.docs.tools import open, pack

__all__ = ["open", "pack"]
