"""Issue 37, item 3: the URL policy refuses every special-purpose range, in every spelling.

The ranges below are IANA's IPv4 and IPv6 Special-Purpose Address Registries (entries and
their "globally reachable" column as published in 2026), written out here rather than read
from ``mastif.tools.netpolicy``, so a range missing from the policy's table fails here.
Each not-globally-reachable range is tried at its first, a middle and its last address,
each address in every spelling a URL can carry: dotted, integer, hex, octal and short
IPv4 forms, and the IPv6 forms that embed an IPv4 address. Before the fix
``192.88.99.0/24`` (6to4 relay anycast, deprecated) and ``::ffff:0:0:0/96``
(IPv4-translated) passed as public, as did the IPv4 and IPv6 addresses Python's
``is_global`` counts as global on 3.11 (``192.0.0.8``, ``192.0.0.9``, ``100:0:0:1::1``,
``3fff::1``, ``5f00::1``, ``2001:1::1`` ...).
"""

from __future__ import annotations

import ipaddress

import pytest

from mastif.tools.base import ToolError
from mastif.tools.netpolicy import check_url

#: IANA IPv4 Special-Purpose Address Registry entries that are not globally reachable,
#: plus multicast (its own registry) and the deprecated 6to4 relay anycast.
NOT_GLOBAL_V4 = [
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.0.0.0/29", "192.0.0.8/32", "192.0.0.170/31",
    "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
    "255.255.255.255/32",
]  # fmt: skip

#: Globally reachable entries inside a refused block: refused with it (their nearest
#: instance is often on the local network: PCP and TURN anycast, AS112 inside 2001::/23).
REFUSED_WITH_THEIR_BLOCK = [
    "192.0.0.9", "192.0.0.10", "2001:1::1", "2001:1::2", "2001:1::3", "2001:3::1",
    "2001:4:112::1", "2001:20::1", "2001:30::1",
]  # fmt: skip

#: Globally reachable special-purpose entries outside any refused block: allowed.
GLOBAL_SPECIAL = ["192.31.196.1", "192.52.193.1", "192.175.48.1", "2620:4f:8000::1"]

#: IANA IPv6 Special-Purpose Address Registry entries that are not globally reachable
#: (or that embed an IPv4 address: NAT64, 6to4, Teredo), plus multicast, ULA, site-local.
#: IPv4-mapped ``::ffff:0:0/96`` is not listed: its addresses are the IPv4 addresses
#: themselves (checked as such, in the IPv4 spellings above), most of them public.
NOT_GLOBAL_V6 = [
    "::1/128", "::/128", "::ffff:0:0:0/96", "::/96", "64:ff9b::/96",
    "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64", "2001::/23", "2001::/32",
    "2001:2::/48", "2001:10::/28", "2001:db8::/32", "2002::/16", "3fff::/20",
    "5f00::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
]  # fmt: skip


def _samples(cidr: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    net = ipaddress.ip_network(cidr)
    middle = net.network_address + (net.num_addresses // 2)
    return sorted({net.network_address, middle, net.broadcast_address})


def _v4_spellings(a: ipaddress.IPv4Address) -> list[str]:
    """Every host spelling of ``a`` a URL can carry (the policy must refuse each)."""
    b = a.packed
    n = int(a)
    return [
        str(a),
        str(n),  # one integer
        hex(n),  # one hex integer
        ".".join(f"0x{x:02x}" for x in b),  # dotted hex
        ".".join(f"0{x:o}" for x in b),  # dotted octal
        f"{b[0]}.{b[1]}.{b[2] * 256 + b[3]}",  # a.b.c short form
        f"{b[0]}.{(b[1] << 16) + (b[2] << 8) + b[3]}",  # a.b short form
        f"[::ffff:{a}]",  # IPv4-mapped
        f"[::ffff:{n >> 16:x}:{n & 0xFFFF:x}]",  # IPv4-mapped, hex
        f"[0:0:0:0:0:ffff:{a}]",  # IPv4-mapped, expanded
        f"[::ffff:0:{a}]",  # IPv4-translated
        f"[::{a}]",  # IPv4-compatible
        f"[64:ff9b::{a}]",  # NAT64
        f"[2002:{n >> 16:x}:{n & 0xFFFF:x}::1]",  # 6to4
        f"[2001:0:4136:e378:8000:63bf:{~n >> 16 & 0xFFFF:x}:{~n & 0xFFFF:x}]",  # Teredo
    ]


def _v6_spellings(a: ipaddress.IPv6Address) -> list[str]:
    return [
        f"[{a.compressed}]",
        f"[{a.exploded}]",
        f"[{a.exploded.upper()}]",
        f"[{a.compressed}%25eth0]",  # with a zone
    ]


V4_CASES = sorted({s for cidr in NOT_GLOBAL_V4 for a in _samples(cidr) for s in _v4_spellings(a)})
V6_CASES = sorted({s for cidr in NOT_GLOBAL_V6 for a in _samples(cidr) for s in _v6_spellings(a)})


@pytest.mark.parametrize("host", V4_CASES)
def test_every_ipv4_special_range_is_refused_in_every_spelling(host):
    with pytest.raises(ToolError):
        check_url(f"http://{host}/")
    with pytest.raises(ToolError):
        check_url(f"https://user:pw@{host}:8443/path?q=1")


@pytest.mark.parametrize("host", V6_CASES)
def test_every_ipv6_special_range_is_refused_in_every_spelling(host):
    with pytest.raises(ToolError):
        check_url(f"http://{host}/")


@pytest.mark.parametrize("address", REFUSED_WITH_THEIR_BLOCK)
def test_anycast_exceptions_inside_a_refused_block_are_refused(address):
    host = address if ":" not in address else f"[{address}]"
    with pytest.raises(ToolError, match="refused"):
        check_url(f"http://{host}/")


@pytest.mark.parametrize(
    "url",
    [
        "http://192.88.99.1/",  # 6to4 relay anycast: passed before the fix
        "http://[::ffff:0:7f00:1]/",  # IPv4-translated 127.0.0.1: passed before the fix
        "http://[::ffff:0:a9fe:a9fe]/",  # IPv4-translated 169.254.169.254
        "http://[::ffff:0:192.168.1.1]/",
        "http://192.0.0.8/",
        "http://[3fff::1]/",
        "http://[5f00::1]/",
        "http://[100:0:0:1::1]/",
    ],
)
def test_the_issue_37_holes_are_closed(url):
    with pytest.raises(ToolError, match="refused"):
        check_url(url)


@pytest.mark.parametrize(
    "address", [*GLOBAL_SPECIAL, "8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "2a00:1450::1"]
)
def test_globally_reachable_addresses_still_pass(address):
    host = address if ":" not in address else f"[{address}]"
    assert check_url(f"http://{host}/") == [address]


def test_the_case_count_covers_the_registries():
    # a guard against a parametrisation that silently shrinks
    assert len(V4_CASES) > 500 and len(V6_CASES) > 150
    # a dotted quad with leading zeros is octal (010.0.0.1 is 8.0.0.1), as in browsers
    assert check_url("http://010.0.0.1/") == ["8.0.0.1"]
