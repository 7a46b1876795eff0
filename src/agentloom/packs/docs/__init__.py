"""The docs pack: documentation navigation from ``.knowledge/config.yaml``, and its CLI."""

from agentloom.packs.docs.tools import pack

__all__ = ["pack"]
