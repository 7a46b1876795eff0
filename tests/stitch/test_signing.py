"""Signed callback URLs, in process: what a URL carries, what a signature binds, what is refused."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from agentloom.stitch.signing import Signer

RUN = "0b7e4f9c-5a0d-4c4e-9d7e-2f1c3a4b5c6d"


def test_a_callback_url_carries_the_attempt_and_a_signature_it_verifies() -> None:
    signer = Signer("s3cret", "http://127.0.0.1:8080/")
    url = urlsplit(signer.callback_url(RUN, "fetch_0", 3))
    assert (url.scheme, url.netloc, url.path) == ("http", "127.0.0.1:8080", f"/api/stitch/callback/{RUN}/fetch_0")
    query = parse_qs(url.query)
    assert query["attempt"] == ["3"] and len(query["sig"][0]) == 32
    assert int(query["sig"][0], 16) >= 0  # hexadecimal
    assert signer.verify(RUN, "fetch_0", 3, query["sig"][0])


def test_the_signature_binds_run_node_attempt_and_secret() -> None:
    signer = Signer("s3cret", "http://h")
    sig = signer.signature(RUN, "a", 1)
    assert sig == signer.signature(RUN, "a", 1)
    others = {
        signer.signature(RUN, "b", 1),
        signer.signature(RUN, "a", 2),
        signer.signature(RUN.replace("0", "1", 1), "a", 1),
        Signer("other", "http://h").signature(RUN, "a", 1),
    }
    assert sig not in others and len(others) == 4
    # The separator keeps fields apart: ("ab", "c") is not ("a", "bc").
    assert signer.signature("ab", "c", 1) != signer.signature("a", "bc", 1)
    for forged in (sig[:-1], sig + "0", sig.upper() if sig != sig.upper() else sig[::-1], "", "é" * 32, "\udc80" * 32):
        assert not signer.verify(RUN, "a", 1, forged), forged
    assert not signer.verify(RUN, "a", 2, sig) and not signer.verify(RUN, "b", 1, sig)


@pytest.mark.parametrize("key", ["a/b", "a?b", "a b", "ä"])
def test_a_key_is_one_escaped_path_segment(key: str) -> None:
    url = Signer("k", "http://h").callback_url(RUN, key, 1)
    segment = urlsplit(url).path.rsplit("/", 1)[1]
    assert "/" not in segment and "?" not in segment and " " not in segment and segment.isascii()


def test_the_base_url_loses_only_its_trailing_slashes() -> None:
    url = Signer("k", "http://h/PREFIX//").callback_url(RUN, "a", 1)
    assert url.startswith(f"http://h/PREFIX/api/stitch/callback/{RUN}/a?attempt=1&sig=")


def test_a_slash_in_a_key_is_escaped_not_kept() -> None:
    url = Signer("k", "http://h").callback_url(RUN, "a/b c", 1)
    assert urlsplit(url).path == f"/api/stitch/callback/{RUN}/a%2Fb%20c"
