"""The core pack: ``health`` and ``breaker_reset``, the tools every server has."""

from agentloom.packs.core.tools import pack

__all__ = ["pack"]
