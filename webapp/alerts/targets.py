"""Where a webhook may point: http(s) to a public address, unless `TIDEMARK_ALERT_ALLOW_PRIVATE=1`.

A webhook is posted from inside the network the control plane runs in. Left open, an operator — or whoever
holds an operator's token — could aim it at the cloud's metadata service (169.254.169.254), at Redis on
127.0.0.1:6379 or at any internal service, and read its answers in the delivery log (SSRF). So a target is
checked when the channel is added and again before every delivery, since a name may resolve elsewhere later;
deliveries do not follow redirects either. A receiver on a private network (a chat bridge in the same VPC, a
test receiver on the loopback) is allowed by setting `TIDEMARK_ALERT_ALLOW_PRIVATE=1`.

What stays possible: a name that resolves to a public address when checked and to an internal one a moment
later, when the delivery connects (a window of one DNS lookup).
"""
from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

SCHEMES = ("http", "https")


def internal_reason(url: str) -> str | None:
    """Why `url` may not be posted to (a scheme other than http(s), an internal address), or None.

    A name that does not resolve now is not refused here: the delivery reports it unreachable.
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        return f"a webhook must be an http(s) URL, not {parts.scheme or 'schemeless'}"
    if settings.TIDEMARK_ALERT_ALLOW_PRIVATE:
        return None
    host = parts.hostname or ""
    for address in _addresses(host, parts.port or (443 if parts.scheme == "https" else 80)):
        if not address.is_global:
            shown = host if host == str(address) else f"{host} ({address})"
            return (f"{shown} is an internal address (loopback, private, link-local or reserved); set "
                    "TIDEMARK_ALERT_ALLOW_PRIVATE=1 to allow webhooks inside your network")
    return None


def _addresses(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        literals = [host.strip("[]")] if ipaddress.ip_address(host.strip("[]")) else []
    except ValueError:
        try:
            literals = [str(info[4][0]) for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)]
        except (socket.gaierror, UnicodeError):
            return []
    found = []
    for literal in literals:
        address = ipaddress.ip_address(literal.split("%")[0])
        # An IPv4 address written as IPv6 (::ffff:127.0.0.1) is judged as the IPv4 address it is.
        mapped = getattr(address, "ipv4_mapped", None)
        found.append(mapped or address)
    return found
