"""Signed callback URLs: the attempt travels in the URL, an HMAC proves we issued it."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote


class Signer:
    def __init__(self, secret: str, base_url: str) -> None:
        self._key = secret.encode()
        self.base_url = base_url.rstrip("/")

    def signature(self, run_id: str, key: str, attempt: int) -> str:
        message = f"{run_id}\n{key}\n{attempt}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]

    def callback_url(self, run_id: str, key: str, attempt: int) -> str:
        sig = self.signature(run_id, key, attempt)
        return f"{self.base_url}/api/stitch/callback/{run_id}/{quote(key, safe='')}?attempt={attempt}&sig={sig}"

    def verify(self, run_id: str, key: str, attempt: int, sig: str) -> bool:
        # As bytes: compare_digest refuses str with non-ASCII characters (a forged sig is a 403, not a 500).
        return hmac.compare_digest(self.signature(run_id, key, attempt).encode(), sig.encode("utf-8", "surrogatepass"))
