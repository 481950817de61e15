"""Endpoint URLs an API registration names, the `allow_urls` patterns they must match, and the
addresses their hosts may lead to (pure: nothing here resolves or connects).

A URL is read strictly, as RFC 3986 writes it: `http` or `https`, `//`, a host (a name, a dotted
IPv4 address or a bracketed IPv6 one), an optional port, a path and an optional query. Refused,
with the reason: a character a URL cannot hold unencoded (a backslash, whitespace, a control
character, anything outside ASCII), user-info (`@`), a fragment (`#`), an empty or non-decimal
port, a name that is not one of letters, digits and hyphens in dot-separated labels or whose last
label does not begin with a letter (`127.1`, `0x7f000001`: resolvers read those as addresses), an
IPv4 address with leading zeros, a zoned IPv6 address, a `.` or `..` path segment, and a
percent-encoded `/`, `\\`, `.` or control character. What is left has one reading, so the URL
that was judged is the URL that is connected to.

A pattern has the same shape, `scheme://host[:port][/path]`, without user-info, query or fragment:

- the scheme must be the URL's;
- the host is matched label by label: in a label `*` matches any run of letters, digits and
  hyphens and `?` one of them; a first label `**` matches one or more labels; names are compared
  without regard to case. An IP address in a pattern matches that address only, and a name
  pattern matches no address;
- the port: none means the scheme's default (80, 443), `*` any, a number that port;
- the path: `*` matches within one segment (no `/`), `**` anything, `?` one character of a
  segment; none means `/`. The query is not judged: it cannot move the connection.

Addresses: a name may lead to public addresses only. A loopback, link-local, private (RFC 1918,
ULA), unspecified, multicast, reserved or cloud metadata address is allowed only when a pattern
matching the URL names it: its host is that address, or `localhost` for a loopback address.
"""

from __future__ import annotations

import ipaddress
import re
import string
from dataclasses import dataclass
from functools import cache

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS = {"http": 80, "https": 443}
_URL_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-._~:/?#[]@!$&'()*+,;=%")
_IPV4 = re.compile(r"[0-9]+(?:\.[0-9]+){3}")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_LABEL_GLOB = re.compile(r"[a-z0-9*?-]{1,63}")
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_PERCENT = re.compile(r"%(.{0,2})")
# Percent-encoded octets that would give the path another reading once a server decodes it.
_AMBIGUOUS_OCTETS = frozenset([ord("/"), ord("\\"), ord("."), 0x7F, *range(0x20)])
# Answers of instance metadata services; most are link-local or private anyway, some are not.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(text)
    for text in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16", "192.0.0.192")
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A URL as read strictly: where a connection to it goes."""

    scheme: str
    host: str
    """The name, lower-case, or the address's text."""
    address: Address | None
    """The host when it is an IP address."""
    port: int
    path: str


@dataclass(frozen=True, slots=True)
class _Authority:
    host: str
    address: Address | None
    port: str | None


def parse_url(url: str) -> Endpoint:
    """`url` read strictly (module docstring); `ValueError` says why it is refused."""
    scheme, rest = _scheme(url)
    authority_end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority = _authority(rest[:authority_end], pattern=False)
    path, _, query = rest[authority_end:].partition("?")
    _check_path(path)
    _check_percent(query)
    port = DEFAULT_PORTS[scheme] if authority.port is None else int(authority.port)
    return Endpoint(scheme, authority.host, authority.address, port, path or "/")


@dataclass(frozen=True, slots=True)
class UrlPattern:
    """One `allow_urls` pattern (module docstring)."""

    scheme: str
    host: Address | re.Pattern[str]
    port: int | None
    """None: any port."""
    path: re.Pattern[str]
    localhost: bool
    """The host is the name `localhost`."""

    def matches(self, endpoint: Endpoint) -> bool:
        """Whether `endpoint` is one this pattern allows (its addresses are judged apart)."""
        if isinstance(self.host, re.Pattern):
            host = endpoint.address is None and self.host.fullmatch(endpoint.host) is not None
        else:
            host = endpoint.address == self.host
        port = self.port is None or self.port == endpoint.port
        return endpoint.scheme == self.scheme and host and port and self.path.fullmatch(endpoint.path) is not None

    def names(self, address: Address) -> bool:
        """Whether this pattern names `address` itself: its host is that address, or `localhost`
        and the address is loopback."""
        return self.host == address or (self.localhost and address.is_loopback)


@cache
def parse_pattern(pattern: str) -> UrlPattern:
    """An `allow_urls` pattern read (module docstring); `ValueError` says what is wrong with it."""
    scheme, rest = _scheme(pattern)
    authority_text, slash, path = rest.partition("/")
    authority = _authority(authority_text, pattern=True)
    path = slash + path
    _check_path(path.replace("*", "x").replace("?", "x"))
    if authority.address is not None:
        host: Address | re.Pattern[str] = authority.address
    else:
        host = _host_glob(authority.host)
    port = None if authority.port == "*" else DEFAULT_PORTS[scheme] if authority.port is None else int(authority.port)
    return UrlPattern(scheme, host, port, _path_glob(path or "/"), authority.host == "localhost")


def refusal(address: Address) -> str | None:
    """Why a connection to `address` needs a pattern naming it, or None for a public address."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        reason = refusal(embedded)
        return None if reason is None else f"{reason} ({embedded})"
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    checks = [
        (address.is_unspecified, "the unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (address.is_private or site_local, "a private address"),
        (address.is_reserved or not address.is_global, "not a public address"),
    ]
    return next((reason for refused, reason in checks if refused), None)


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries to the same place: mapped (`::ffff:a.b.c.d`) or NAT64."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _scheme(text: str) -> tuple[str, str]:
    bad = next((character for character in text if character not in _URL_CHARACTERS), None)
    if bad == "\\":
        raise ValueError("it holds a backslash")
    if bad is not None and (bad.isspace() or not bad.isprintable()):
        raise ValueError(f"it holds whitespace or a control character ({bad!r})")
    if bad is not None:
        raise ValueError(f"it holds {bad!r}, which a URL holds only percent-encoded")
    if "#" in text:
        raise ValueError("it holds a fragment (#)")
    scheme, separator, rest = text.partition("://")
    if not separator or scheme not in DEFAULT_PORTS:
        raise ValueError("it does not begin with http:// or https://")
    return scheme, rest


def _authority(text: str, *, pattern: bool) -> _Authority:
    if "@" in text:
        raise ValueError("it holds user-info (@)")
    port: str | None = None
    if text.startswith("["):
        inside, bracket, after = text[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise ValueError("its IPv6 address is not closed by ] before the port")
        if "%" in inside:
            raise ValueError("its IPv6 address has a zone")
        try:
            address: Address | None = ipaddress.IPv6Address(inside)
        except ValueError:
            raise ValueError(f"[{inside}] is not an IPv6 address") from None
        host = str(address)
        port = after[1:] if after else None
    else:
        if text.count(":") > 1:
            raise ValueError("its host holds ':' outside brackets")
        host, colon, port_text = text.partition(":")
        port = port_text if colon else None
        host = host.lower()
        address = _ipv4(host) if _IPV4.fullmatch(host) else None
        if address is None:
            _check_name(host, pattern=pattern)
    if port is not None and not (_PORT.fullmatch(port) and int(port) <= 65535) and not (pattern and port == "*"):
        raise ValueError(f"its port {port!r} is not a number from 1 to 65535")
    return _Authority(host, address, port)


def _ipv4(host: str) -> ipaddress.IPv4Address:
    if any(len(octet) > 1 and octet.startswith("0") for octet in host.split(".")):
        raise ValueError(f"{host} has an octet with a leading zero, which resolvers may read as octal")
    try:
        return ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(f"{host} is not an IPv4 address") from None


def _check_name(host: str, *, pattern: bool) -> None:
    if not host:
        raise ValueError("it has no host")
    labels = host.split(".")
    if len(host) > 253:
        raise ValueError("its host is longer than 253 characters")
    for index, label in enumerate(labels):
        wild = pattern and (_LABEL_GLOB.fullmatch(label) or (label == "**" and index == 0))
        if not (_LABEL.fullmatch(label) or wild):
            raise ValueError(f"its host {host!r} has a label {label!r} that is not letters, digits and hyphens")
    if not (labels[-1][0].isalpha() or (pattern and labels[-1][0] in "*?")):
        raise ValueError(f"its host {host!r} is neither a name (its last label begins with a digit) nor an address")


def _check_path(path: str) -> None:
    if path and not path.startswith("/"):
        raise ValueError("its path does not begin with /")
    if any(segment in (".", "..") for segment in path.split("/")):
        raise ValueError("its path has a . or .. segment")
    _check_percent(path)


def _check_percent(text: str) -> None:
    for match in _PERCENT.finditer(text):
        digits = match.group(1)
        if len(digits) != 2 or not all(digit in string.hexdigits for digit in digits):
            raise ValueError(f"it holds %{digits}, which is not a percent-encoded octet")
        if int(digits, 16) in _AMBIGUOUS_OCTETS:
            raise ValueError(f"it holds %{digits}, a percent-encoded /, \\, . or control character")


def _host_glob(host: str) -> re.Pattern[str]:
    labels = host.split(".")
    pieces = [r"[a-z0-9-]+(?:\.[a-z0-9-]+)*" if label == "**" else _glob(label, "[a-z0-9-]") for label in labels]
    return re.compile(r"\.".join(pieces))


def _path_glob(path: str) -> re.Pattern[str]:
    pieces = re.split(r"(\*\*)", path)
    return re.compile("".join(".*" if piece == "**" else _glob(piece, "[^/]") for piece in pieces))


def _glob(text: str, one: str) -> str:
    """`text` as a regular expression in which `*` is any run of `one` and `?` a single one."""
    return "".join({"*": f"{one}*", "?": one}.get(piece, re.escape(piece)) for piece in re.split(r"([*?])", text))
