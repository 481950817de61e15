"""Where an API-registered server's URL leads: its host resolved once for each connection, every
answer judged by the registration policy, and the one checked address the connection is pinned to."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence

import anyio

from gateway.config.model import ServerConfig
from gateway.config.urls import Address
from gateway.errors import UpstreamUnavailableError

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""`(host, port)` -> the addresses the host resolves to, as text, in the order to try them."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the operating system resolves `host` to (getaddrinfo), in its order."""
    try:
        answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise UpstreamUnavailableError(f"{host} does not resolve: {error}") from None
    return list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in answers))


async def checked_address(config: ServerConfig, resolver: Resolver) -> str:
    """The address a connection to `config`'s URL goes to, its host resolved once by `resolver`.

    The URL is judged by the server's registration policy again (stored registrations outlive the
    policy they were made under), and so is every address the host resolves to: one refused answer
    refuses the connection (`ForbiddenError`), as a name whose answers change between lookups
    could otherwise pass on one and connect on another.
    """
    assert config.url is not None and config.registration is not None
    endpoint = config.registration.judge_url(config.name, config.url)
    if endpoint.address is not None:
        return str(endpoint.address)
    answers = await resolver(endpoint.host, endpoint.port)
    if not answers:
        raise UpstreamUnavailableError(f"{endpoint.host} resolves to no address")
    addresses = [_address(endpoint.host, answer) for answer in answers]
    for address in addresses:
        config.registration.judge_address(config.name, endpoint, address)
    return str(addresses[0])


def _address(host: str, answer: str) -> Address:
    try:
        return ipaddress.ip_address(answer)
    except ValueError:
        raise UpstreamUnavailableError(f"{host} resolves to {answer!r}, which is not an address") from None
