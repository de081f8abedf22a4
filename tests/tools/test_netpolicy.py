"""Web tools refuse private and loopback addresses (no SSRF), unless explicitly allowed."""

from __future__ import annotations

import pytest

from mastif.tools.base import ToolError
from mastif.tools.netpolicy import UrlPolicy, check_url


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata service
        "http://10.0.0.1/",
        "http://192.168.1.1/admin",
        "http://172.16.5.4:8080/",
        "http://127.0.0.1:8765/",
        "http://localhost/",  # resolves to loopback
        "http://[::1]/",
        "http://[::ffff:10.0.0.1]/",  # IPv4-mapped private address
        "http://100.64.0.1/",  # carrier-grade NAT
        "http://0.0.0.0/",
        "http://224.0.0.1/",  # multicast
    ],
)
def test_private_loopback_and_metadata_addresses_are_refused(url):
    with pytest.raises(ToolError, match="refused"):
        check_url(url)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.org/", "gopher://x/", "http:///nohost"]
)
def test_other_schemes_and_hostless_urls_are_refused(url):
    with pytest.raises(ToolError, match="refused"):
        check_url(url)


def test_public_addresses_pass():
    assert check_url("https://93.184.215.14/index.html") == ["93.184.215.14"]
    assert check_url("http://[2606:4700:4700::1111]/") == ["2606:4700:4700::1111"]


def test_explicit_allowances():
    sandbox = UrlPolicy(allowed=frozenset({"127.0.0.1:8765"}))
    assert check_url("http://127.0.0.1:8765/shop?q=shoes", sandbox) == ["127.0.0.1"]
    with pytest.raises(ToolError, match="refused"):
        check_url("http://127.0.0.1:8766/", sandbox)  # only the listed port
    assert check_url("http://10.0.0.1/", UrlPolicy(allow_private=True)) == ["10.0.0.1"]


def test_unresolvable_host_is_a_clear_error():
    with pytest.raises(ToolError, match="could not resolve host 'no-such-host.invalid'"):
        check_url("http://no-such-host.invalid/")
