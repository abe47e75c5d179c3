"""Which network addresses MCP servers may be reached at: the operator's decision.

An ``mcp`` item names a URL, and the mcp-tool service connects wherever it points. Whoever
may put such an item could otherwise use the service to probe the private network (is there
a database on 10.0.0.5:5432?). So every address is checked against the policy the operator
gave the process, in this order:

1. ``--mcp-deny ENTRY[,ENTRY...]`` (``TOOLMESH_MCP_DENY``): never reached, by anyone's item;
2. ``--mcp-allow ENTRY[,ENTRY...]`` (``TOOLMESH_MCP_ALLOW``): reached by everyone's items,
   private or not (this is how a private server is opened to tokens without ``admin``);
3. a private, loopback, link-local or otherwise non-global address (``127.0.0.0/8``,
   ``10.0.0.0/8``, ``172.16.0.0/12``, ``192.168.0.0/16``, ``169.254.0.0/16``, ``100.64.0.0/10``,
   ``0.0.0.0``, ``::1``, ``fc00::/7``, ``fe80::/10``...; an IPv4-mapped IPv6 address counts as
   its IPv4 address) is reached only by items whose :data:`REACH_FIELD` is not ``"public"``;
4. any other (public) address is reached.

An entry is an address or network with an optional port, or a host name (exact, any case):
``10.0.0.0/8``, ``127.0.0.1:8000``, ``[::1]:8000``, ``fd00::/8``, ``mcp.internal:8000``.
A name entry matches the URL's host name; address entries match the address actually
connected to. Every host — a URL's and an entry's — is brought to one spelling first
(:mod:`.host_names`: percent-encoding, IDNA, case, a trailing dot, the IPv4 spellings the C
library reads), and ``localhost`` names are loopback whatever the resolver says, so
``localhost.`` or ``0x7f000001`` is no way round a check.

Who may use private addresses is recorded on the item itself: the gateway sets
``"reach": "public"`` on every ``mcp`` item put by a token without the ``admin`` capability
(overwriting what the client sent), and leaves an admin's item as the admin wrote it. The
mcp-tool service checks each address it connects to — after resolving the name, so a public
name that resolves (or is rebound) to a private address is caught — and the gateway checks
the URL's host (resolved) when the item is put, so a refusal comes at once.

:class:`AddressPolicy` is the one way in: :meth:`AddressPolicy.refusal` for one resolved
address, :meth:`AddressPolicy.check_url` for a URL (resolving its host).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args
from urllib.parse import urlsplit

from toolmesh.config.mcp_addresses import ALLOW_ENV, ALLOW_FLAG, DENY_ENV, DENY_FLAG
from toolmesh.errors import ToolmeshError
from toolmesh.mcp.host_names import LOOPBACK, canonical_host, is_localhost, literal_address

#: the field of an ``mcp`` item that says which addresses it may reach
REACH_FIELD = "reach"
#: ``any``: every address the operator does not deny (the default: an admin's item);
#: ``public``: public addresses and the operator's allow-list only
Reach = Literal["any", "public"]
REACHES: tuple[str, ...] = get_args(Reach)
#: the most a put waits for the URL's host name to resolve (unresolved: checked on connect)
RESOLVE_TIMEOUT = 3.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefused(ToolmeshError):
    """An MCP server address the policy does not let this item reach, or an unusable entry of
    the operator's list."""

    type = "address-refused"


def is_private(address: IPAddress) -> bool:
    """Whether ``address`` is not a public internet address (private, loopback, link-local,
    shared, reserved, unspecified, multicast)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One entry of the allow- or deny-list: a network or a host name, maybe with a port."""

    network: IPNetwork | None = None
    name: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str, *, flag: str) -> Entry:
        """From ``10.0.0.0/8``, ``127.0.0.1:8000``, ``[::1]:8000``, ``fd00::/8``,
        ``mcp.internal:8000``; :class:`AddressRefused` for anything else."""
        raw = text.strip()
        port: int | None = None
        host = raw
        if raw.startswith("["):
            host, _, rest = raw[1:].partition("]")
            if rest:
                if not rest.startswith(":"):
                    raise _bad_entry(text, flag)
                port = _port(rest[1:], text, flag)
        elif raw.count(":") == 1:
            host, _, number = raw.partition(":")
            port = _port(number, text, flag)
        try:
            return cls(network=ipaddress.ip_network(host, strict=False), port=port)
        except ValueError:
            pass
        try:
            name = canonical_host(host)
        except ValueError:
            raise _bad_entry(text, flag) from None
        address = literal_address(name)  # 0x7f000001: an address however it is spelled
        if address is not None:
            return cls(network=ipaddress.ip_network(address), port=port)
        return cls(name=name, port=port)

    def matches(self, host: str, address: IPAddress | None, port: int) -> bool:
        """Whether the entry covers ``host`` (as the URL names it) at ``address`` (``None``:
        not resolved yet) and ``port``."""
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            try:
                return canonical_host(host) == self.name
            except ValueError:
                return False
        if address is None or self.network is None:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None \
                and self.network.version == 4:
            address = address.ipv4_mapped
        return address.version == self.network.version and address in self.network

    def __str__(self) -> str:
        where = self.name or str(self.network)
        if self.port is None:
            return where
        return f"[{where}]:{self.port}" if ":" in where else f"{where}:{self.port}"


def _port(text: str, entry: str, flag: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise _bad_entry(entry, flag)
    return int(text)


def _bad_entry(text: str, flag: str) -> AddressRefused:
    return AddressRefused(f"{flag} {text!r} is not an address, network or host name (with an "
                          "optional port): give e.g. 10.0.0.0/8, 127.0.0.1:8000, [::1]:8000 "
                          "or mcp.internal:8000", type="usage-error")


def _entries(texts: str | Iterable[str] | None, flag: str) -> tuple[Entry, ...]:
    if texts is None:
        return ()
    pieces = [texts] if isinstance(texts, str) else list(texts)
    words = [w for piece in pieces for w in piece.replace(",", " ").split() if w]
    return tuple(Entry.parse(w, flag=flag) for w in words)


def host_port(url: str) -> tuple[str, int]:
    """The host (no brackets) and port (the scheme's default if none) of an http(s) URL;
    ``ValueError`` if it has none."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        raise ValueError("the URL has no host")
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    return host, port


def shown(host: str, port: int) -> str:
    """``host:port`` as a message shows it (``[::1]:8000`` for IPv6)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` stands for (itself if it is one, however spelled; loopback for
    a ``localhost`` name), in the resolver's order; ``OSError`` if it does not resolve,
    ``ValueError`` if it cannot be a host (:func:`~toolmesh.mcp.host_names.canonical_host`)."""
    name = canonical_host(host)
    address = literal_address(name)
    if address is not None:
        return [address]
    if is_localhost(name):
        return list(LOOPBACK)
    infos = await asyncio.get_running_loop().getaddrinfo(
        name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    found: list[IPAddress] = []
    for family, *_, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in found:
                found.append(address)
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class AddressPolicy:
    """The operator's allow- and deny-list of MCP server addresses (module docstring)."""

    allow: tuple[Entry, ...] = ()
    deny: tuple[Entry, ...] = ()

    @classmethod
    def parse(cls, *, allow: str | Iterable[str] | None = None,
              deny: str | Iterable[str] | None = None) -> AddressPolicy:
        """From the flags' text (commas or spaces between entries); :class:`AddressRefused`
        (type ``usage-error``) for an entry that is none."""
        return cls(allow=_entries(allow, ALLOW_FLAG), deny=_entries(deny, DENY_FLAG))

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> AddressPolicy:
        env = os.environ if environ is None else environ
        return cls.parse(allow=env.get(ALLOW_ENV), deny=env.get(DENY_ENV))

    def refusal(self, host: str, address: IPAddress | None, port: int, *,
                reach: Reach) -> str | None:
        """Why an item of ``reach`` may not connect to ``address`` (``host`` as its URL names
        it) on ``port``, for the operator's log; ``None``: it may."""
        where = shown(str(address) if address is not None else host, port)
        for entry in self.deny:
            if entry.matches(host, address, port):
                return f"{where} is denied by {DENY_FLAG} {entry}"
        if any(entry.matches(host, address, port) for entry in self.allow):
            return None
        if reach == "public" and address is not None and is_private(address):
            return (f"{where} is a private, loopback or link-local address, which only items "
                    f"put by the admin may reach (the operator may open it with "
                    f"{ALLOW_FLAG} {where})")
        return None

    async def check_url(self, url: str, *, reach: Reach,
                        timeout: float = RESOLVE_TIMEOUT) -> str | None:
        """Why an item of ``reach`` may not use ``url`` (its host resolved here, every
        address checked), or ``None``. A host that does not resolve within ``timeout`` is
        not refused here: the connection, which resolves it again, is checked too."""
        try:
            host, port = host_port(url)
        except ValueError:
            return None  # not a URL: the item's validation says so
        try:
            canonical_host(host)
        except ValueError as e:
            return str(e)  # nothing could connect there, and no check can say where it is
        refused = self.refusal(host, None, port, reach=reach)  # a denied name
        if refused is not None:
            return refused
        try:
            async with asyncio.timeout(timeout):
                addresses = await resolve(host, port)
        except (OSError, TimeoutError):
            return None
        for address in addresses:
            refused = self.refusal(host, address, port, reach=reach)
            if refused is not None:
                return refused
        return None

    @property
    def default(self) -> bool:
        return not (self.allow or self.deny)

    def __str__(self) -> str:
        allow = ", ".join(map(str, self.allow)) or "none"
        deny = ", ".join(map(str, self.deny)) or "none"
        return f"allowed: {allow}; denied: {deny}"


#: the default: no list; private addresses only for items an admin put
DEFAULT_POLICY = AddressPolicy()


def reach_of(value: Mapping[str, object]) -> Reach:
    """The reach an ``mcp`` item's value says (``any`` when it says none)."""
    reach = value.get(REACH_FIELD)
    return "public" if reach == "public" else "any"
