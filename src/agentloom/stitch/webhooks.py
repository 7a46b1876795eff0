"""Where Stitch may send webhooks, and what it keeps of a worker's answer.

- A webhook URL must be http(s) and carry no credentials (``user:pass@``): they would sit in
  the flow's graph for every reader of it. Refused when the flow is saved.
- Link-local addresses (169.254.0.0/16, fe80::/10) and cloud metadata services
  (169.254.169.254, fd00:ec2::254, 100.100.100.200) are refused: a worker URL pointing
  there would make Stitch fetch instance credentials. An address literal is refused when
  the flow is saved; a host name is resolved when the webhook is sent, and refused if any
  address it resolves to is refused (the connection then goes to exactly the addresses
  checked). ``STITCH_WEBHOOK_ALLOW`` (comma-separated addresses, networks or host names)
  permits some anyway.
- The host is judged as the HTTP client will connect to it (:func:`client_host`), at save
  and at send alike: the client maps ideographic full stops to dots, fullwidth digits and
  letters to ASCII and applies IDNA, so ``http://169。254。169。254/`` is 169.254.169.254 and
  is refused as such. Integer, octal and hexadecimal forms (``2852039166``,
  ``0251.0376.0251.0376``) are refused when the flow is saved; at send time the client refuses
  an integer form itself, and any form it hands to the resolver is judged by the addresses
  the resolver returns.
- Loopback and private networks are allowed: workers often run beside Stitch.
  ``STITCH_WEBHOOK_DENY_PRIVATE=true`` refuses every address that is not global.
- Redirects are not followed (a 3xx fails the dispatch and says so), at most
  ``STITCH_WORKER_MAX_RESPONSE_BYTES`` of a worker's answer are read, and of an error answer
  only a short excerpt is kept, without control characters.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from yarl import URL

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA = tuple(ipaddress.ip_network(n) for n in ("169.254.169.254/32", "fd00:ec2::254/128", "100.100.100.200/32"))
LINK_LOCAL = tuple(ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

EXCERPT_BYTES = 1024  # read at most this much of a worker's error answer
MAX_RESPONSE_BYTES = 64 * 1024  # and at most this much of any answer (STITCH_WORKER_MAX_RESPONSE_BYTES)
EXCERPT_CHARS = 200  # and keep at most this much of it


class TargetRefused(Exception):
    """A webhook target the policy refuses (raised by the resolver at dispatch time)."""


class WebhookPolicy:
    def __init__(self, allow: str | None = None, deny_private: bool = False) -> None:
        self.deny_private = deny_private
        networks: list[Network] = []
        hosts: set[str] = set()
        for entry in (allow or "").split(","):
            entry = entry.strip().strip("[]")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        self.allowed_networks = tuple(networks)
        self.allowed_hosts = frozenset(hosts)

    def address_problem(self, address: Address) -> str | None:
        """Why a webhook may not go to this address ('<address>, a ... address'), or None. An IPv6
        address that carries an IPv4 one (mapped, NAT64, 6to4) is judged by the IPv4 address it reaches."""
        target = _embedded_ipv4(address) or address
        if any(target in n for n in self.allowed_networks if n.version == target.version):
            return None
        if any(target in n for n in METADATA if n.version == target.version):
            return f"{address}, a cloud metadata address"
        if any(target in n for n in LINK_LOCAL if n.version == target.version):
            return f"{address}, a link-local address"
        if self.deny_private and not target.is_global:
            return f"{address}, not a public address (STITCH_WEBHOOK_DENY_PRIVATE is set)"
        return None

    def host_allowed(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.allowed_hosts

    def url_problem(self, url: Any) -> str | None:
        """Why a flow may not use ``url`` as a webhook (checked when the flow is saved), or None."""
        if not isinstance(url, str):
            return "must be an http(s) URL"
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises for a port that is not a number in range
        except ValueError as exc:
            return f"is not a valid URL ({exc})"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return "must be an http(s) URL"
        if parts.username is not None or parts.password is not None:
            return (
                "must not contain credentials (user:password@); send them another way, e.g. in the worker's own config"
            )
        if any(ch.isspace() or not ch.isprintable() for ch in url):
            return "must not contain spaces or control characters"
        host = client_host(url)
        if host is None:
            return "has a host the HTTP client cannot use; write it as a host name or an address"
        if self.host_allowed(host):
            return None
        address = _address(host)
        if address is None:
            try:
                socket.inet_aton(host)  # 2852039166, 0xa9.0xfe.0xa9.0xfe, 169.254.43518 ...
            except OSError:
                return None  # a host name: checked when it is resolved, at dispatch time
            return f"uses the address {host!r} in a legacy numeric form; write it as a dotted quad"
        problem = self.address_problem(address)
        if problem is None:
            return None
        written = parts.hostname
        as_written = "" if written == host else f" (written {written!r}, which the HTTP client reads as {host})"
        return f"points to {problem}{as_written}; allow it with STITCH_WEBHOOK_ALLOW if that is intended"

    def literal_problem(self, host: str | None) -> str | None:
        """At dispatch time, for a host that is an address literal (not resolved, so checked here)."""
        if host is None or self.host_allowed(host):
            return None
        address = _address(host)
        return None if address is None else self.address_problem(address)

    def resolver(self) -> AbstractResolver:
        """An aiohttp resolver that refuses names resolving to a refused address."""
        from aiohttp import DefaultResolver
        from aiohttp.abc import AbstractResolver

        policy = self

        class GuardedResolver(AbstractResolver):
            def __init__(self, inner: AbstractResolver) -> None:
                self.inner = inner

            async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> Any:
                results = await self.inner.resolve(host, port, family)
                if not policy.host_allowed(host):
                    for result in results:
                        address = _address(result["host"])
                        problem = policy.address_problem(address) if address is not None else None
                        if problem:
                            raise TargetRefused(
                                f"{host} resolves to {problem}; allow it with STITCH_WEBHOOK_ALLOW if that is intended"
                            )
                return results

            async def close(self) -> None:
                await self.inner.close()

        return GuardedResolver(DefaultResolver())


def client_host(url: str) -> str | None:
    """The host the HTTP client (aiohttp, through yarl) connects to for ``url``: IDNA-encoded,
    ideographic full stops and fullwidth forms folded to ASCII. None when it cannot parse it."""
    try:
        return URL(url).host
    except (ValueError, UnicodeError):
        return None


def _address(host: str) -> Address | None:
    """The address a literal host means; a trailing dot (a fully qualified name) changes nothing."""
    try:
        return ipaddress.ip_address(host.strip("[]").rstrip("."))
    except ValueError:
        return None


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped, NAT64 or 6to4 IPv6 address."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def shown_url(url: str) -> str:
    """The URL for messages: without credentials, bounded, without control characters."""
    try:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            netloc = parts.hostname or ""
            if ":" in netloc:
                netloc = f"[{netloc}]"
            if parts.port is not None:
                netloc += f":{parts.port}"
            url = urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        pass
    return excerpt(url, 300)


def excerpt(text: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """At most ``limit`` printable characters of ``text``; controls become spaces, runs of spaces one."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    cleaned = "".join(ch if ch.isprintable() else " " for ch in text[: limit * 4])
    cleaned = " ".join(cleaned.split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 3] + "..."
