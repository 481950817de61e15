"""Which values of a configuration are secrets, for the `Redactor` to keep out of everything written."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

from gateway.config.model import GatewayConfig, ServerConfig


def secrets_of(config: GatewayConfig) -> Iterator[str]:
    """Every secret value in `config`: the `secrets` section's, servers' `env` and `headers` values,
    the query values and password of their URLs, plain API keys, the JWT secret, the store URL's password, the
    registrations' key and the trace collector's headers."""
    yield from config.secrets.values.values()
    for server in config.servers:
        yield from server_secrets(server)
    yield from config.auth.plain_keys
    if config.auth.jwt is not None and config.auth.jwt.hs256_secret is not None:
        yield config.auth.jwt.hs256_secret
    if config.store.url is not None and (password := urlsplit(config.store.url).password):
        # Written percent-encoded in the URL, sent decoded: either form may show up in an error.
        yield password
        yield unquote(password)
    if config.store.key is not None:
        yield config.store.key
    if config.tracing is not None:
        yield from _header_secrets(config.tracing.headers)


def server_secrets(server: ServerConfig) -> Iterator[str]:
    """The secret values of one server: its `env` and `headers` values, its URL's query values and password."""
    yield from server.env.values()
    yield from _header_secrets(server.headers)
    if server.oauth is not None and server.oauth.client_secret is not None:
        yield server.oauth.client_secret
    if server.url is not None:
        parts = urlsplit(server.url)
        yield from (value for _, value in parse_qsl(parts.query))
        if parts.password:
            yield parts.password


def _header_secrets(headers: Mapping[str, str]) -> Iterator[str]:
    for value in headers.values():
        # `Authorization: Bearer <token>`: the token may show up without its scheme.
        yield value
        yield from value.split()
