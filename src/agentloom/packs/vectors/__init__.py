"""The vectors pack: ChromaDB collections, chunked documents, search and filters."""

from agentloom.packs.vectors.tools import pack

__all__ = ["pack"]
