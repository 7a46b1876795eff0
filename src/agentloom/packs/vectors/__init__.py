"""The vectors pack: ChromaDB collections, chunked documents, search and filters."""

from agentloom.packs.vectors.tools import open, pack

__all__ = ["open", "pack"]
