"""The skills pack: find the right Agent Skill (``SKILL.md``) for a request, in any language, on LanceDB."""

from agentloom.packs.skills.tools import pack

__all__ = ["pack"]
