"""What the packs that store and search text share: the Chroma connection, our embedding service as
Chroma's embedding function, Chroma's answer columns, and keyword search with rank fusion.

Packs are independent of each other, so what two of them use (vectors and flowise) lives here, below both.
"""
