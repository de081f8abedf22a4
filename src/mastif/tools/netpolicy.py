"""Which URLs a web tool may fetch: no SSRF from an agent running on someone's machine.

An agent chooses the URLs its web tools open. On a cluster node that would let a model
reach the cloud metadata service (169.254.169.254), the site's private network or services
on the node's loopback. :func:`check_url` refuses every address in a range of IANA's
special-purpose address registries (IPv4 and IPv6) that is not globally reachable, every
IPv6 form that embeds or routes to an IPv4 address (IPv4-mapped ones are decoded and
checked as IPv4), multicast, and every IPv6 address outside global unicast ``2000::/3`` —
unless the config explicitly allows private addresses, or the host and port are listed
(the offline sandbox's own server). The ranges are a table here, not Python's
``is_global``, whose answer differs between Python releases. Host names
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


#: IPv4 ranges refused: every entry of IANA's IPv4 Special-Purpose Address Registry that
#: is not globally reachable, plus multicast and the deprecated 6to4 relay anycast. The
#: whole of 192.0.0.0/24 is refused, its two anycast exceptions (PCP, TURN) included: the
#: nearest instance of those is often a device on the local network.
_REFUSED_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # this network
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local (cloud metadata services)
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments (DS-Lite, NAT64 discovery, dummy ...)
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the limited broadcast 255.255.255.255
    )
)

#: IPv6 global unicast: everything outside it is unassigned, reserved or special (loopback,
#: unspecified, IPv4-mapped and -compatible, discard, ULA, link-local, site-local, multicast).
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")

#: IPv6 ranges inside ``2000::/3`` refused: IANA's special-purpose entries that are not
#: globally reachable, and those that embed or route to an IPv4 address (Teredo inside
#: 2001::/32, 6to4), which a relay would carry to the embedded, maybe private, address.
#: The whole of 2001::/23 is refused, its few anycast and overlay exceptions included.
#: Outside ``2000::/3`` (refused as a whole) lie NAT64 ``64:ff9b::/96`` and
#: ``64:ff9b:1::/48``, IPv4-compatible ``::/96``, IPv4-translated ``::ffff:0:0:0/96``,
#: discard-only ``100::/64``, ULA, link-local, site-local and multicast.
_REFUSED_V6 = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "2001::/23",  # IETF protocol assignments (Teredo, benchmarking, ORCHID ...)
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4
        "3fff::/20",  # documentation
    )
)


def _is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``address`` may be fetched from under the default policy (see the tables)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # ::ffff:a.b.c.d is the IPv4 address itself
            return _is_public(address.ipv4_mapped)
        if address.scope_id is not None or address not in _GLOBAL_UNICAST_V6:
            return False
        return not any(address in net for net in _REFUSED_V6)
    return not any(address in net for net in _REFUSED_V4)


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
