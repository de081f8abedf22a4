"""Which URLs a web tool may fetch: no SSRF from an agent running on someone's machine.

An agent chooses the URLs its web tools open. On a cluster node that would let a model
reach the cloud metadata service (169.254.169.254), the site's private network or services
on the node's loopback. :func:`check_url` refuses every address that is not globally
routable — private, loopback, link-local, carrier-grade NAT, multicast, reserved,
unspecified, IPv4-mapped forms of those, NAT64, 6to4, IPv4-compatible and
site-local IPv6 — unless the config explicitly allows private
addresses, or the host and port are listed (the offline sandbox's own server). Host names
are resolved and *every* address they resolve to is checked, so a name pointing at a
private address is refused too. A check alone does not stop DNS rebinding (the name
resolving to a public address for the check and to a private one for the connection): the
caller must connect to the addresses :func:`check_url` returns, never resolve the name
again. :class:`mastif.tools.http.HttpFetcher` does so.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from mastif.tools.base import ToolError

ALLOWED_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class UrlPolicy:
    """``allow_private``: every address allowed (a user's explicit choice); ``allowed``:
    ``host:port`` pairs allowed whatever their address (e.g. ``127.0.0.1:8765``)."""

    allow_private: bool = False
    allowed: frozenset[str] = field(default_factory=frozenset)


# IPv6 ranges that embed or route to an IPv4 address (NAT64, 6to4, IPv4-compatible) or are
# deprecated site-local: ``is_global`` calls some of them global on older Pythons, yet a
# NAT64 gateway or 6to4 relay would carry the request to the embedded (maybe private)
# IPv4 address. Refused outright, whatever they embed.
_REFUSED_V6 = tuple(
    ipaddress.IPv6Network(n)
    for n in ("64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "::/96", "fec0::/10")
)


def _is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return _is_public(address.ipv4_mapped)
        if any(address in net for net in _REFUSED_V6):
            return False
    return address.is_global and not address.is_multicast


def _port(scheme: str, port: int | None) -> int:
    return port if port is not None else (443 if scheme == "https" else 80)


def check_url(url: str, policy: UrlPolicy | None = None) -> list[str]:
    """The addresses ``url`` may be fetched from (connect to these, not to the name);
    :class:`ToolError` if it may not be.

    Raises for a scheme other than http(s), a URL without a host, a host that does not
    resolve, or any resolved address that is not public (unless the policy allows it).
    """
    policy = policy or UrlPolicy()
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise ToolError(f"refused {url!r}: only {', '.join(ALLOWED_SCHEMES)} URLs are allowed")
    host = parts.hostname
    if not host:
        raise ToolError(f"refused {url!r}: no host")
    try:
        port = _port(scheme, parts.port)
    except ValueError:
        raise ToolError(f"refused {url!r}: invalid port") from None
    try:
        literal = ipaddress.ip_address(host)
        addresses = [literal]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ToolError(f"could not resolve host {host!r}: {exc}") from None
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    if f"{host}:{port}" in policy.allowed or policy.allow_private:
        return [str(a) for a in addresses]
    blocked = [a for a in addresses if not _is_public(a)]
    if blocked:
        raise ToolError(
            f"refused {url!r}: {host} is a private, loopback, link-local or reserved address "
            f"({', '.join(str(a) for a in blocked)}); web tools reach only public addresses "
            "unless the config allows private ones"
        )
    return [str(a) for a in addresses]
