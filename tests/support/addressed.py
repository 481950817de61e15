"""MCP servers over HTTP (or HTTPS) on chosen loopback addresses, each telling which one answered
and what Host header it was sent, and resolvers that answer what a test says instead of asking DNS."""

from __future__ import annotations

import datetime
import json
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass
class Addressed:
    """A server listening on `host`:`port`; `requests` holds the path of every HTTP request it got."""

    host: str
    port: int
    requests: list[str] = field(default_factory=list)


def _recording(app: ASGIApp, served: Addressed, redirect: str | None) -> ASGIApp:
    async def record(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        served.requests.append(scope["path"])
        if redirect is None:
            await app(scope, receive, send)
            return
        headers = [(b"location", redirect.encode()), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 307, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    return record


@asynccontextmanager
async def addressed_server(
    label: str,
    host: str,
    port: int = 0,
    *,
    transport: str = "http",
    redirect: str | None = None,
    tls: TlsFiles | None = None,
) -> AsyncIterator[Addressed]:
    """An MCP server on `host`:`port` (a free port when 0), over streamable HTTP at `/mcp` or legacy
    SSE at `/sse`, over TLS with `tls`'s certificate; its tool `where` answers `{"server": label,
    "host": <the Host header>}`. With `redirect`, every request is answered 307 to that URL instead."""
    server = MCPServer(label)

    @server.tool()
    async def where(ctx: Context) -> str:
        """Which server answered, and the Host header of the request."""
        request = ctx.request_context.request
        assert isinstance(request, Request)
        return json.dumps({"server": label, "host": request.headers["host"]})

    app = server.sse_app() if transport == "sse" else server.streamable_http_app()
    # A socket already listening queues connections until uvicorn accepts them: nothing to wait for.
    listener = socket.socket()
    listener.bind((host, port))
    listener.listen()
    served = Addressed(host, listener.getsockname()[1])
    options: dict[str, Any] = {} if tls is None else {"ssl_certfile": tls.certificate, "ssl_keyfile": tls.key}
    config = uvicorn.Config(_recording(app, served, redirect), log_level="warning", lifespan="on", **options)
    uv = uvicorn.Server(config)
    with listener:
        async with anyio.create_task_group() as group:
            group.start_soon(uv.serve, [listener])
            try:
                yield served
            finally:
                uv.should_exit = True


@dataclass(frozen=True)
class TlsFiles:
    """A certificate authority's certificate, and a server certificate it signed with its key (PEM files)."""

    authority: Path
    certificate: Path
    key: Path


def tls_files(directory: Path, name: str) -> TlsFiles:
    """A new authority and a certificate it signed for the DNS name `name`, written under `directory`."""
    authority_key = ec.generate_private_key(ec.SECP256R1())
    server_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key: ec.EllipticCurvePrivateKey, authority: bool) -> x509.CertificateBuilder:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test authority")]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=authority, path_length=None), critical=True)
        )
        if not authority:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return builder

    files = TlsFiles(directory / "authority.pem", directory / "server.pem", directory / "server.key")
    signed_authority = certificate("test authority", authority_key, True).sign(authority_key, hashes.SHA256())
    signed_server = certificate(name, server_key, False).sign(authority_key, hashes.SHA256())
    files.authority.write_bytes(signed_authority.public_bytes(serialization.Encoding.PEM))
    files.certificate.write_bytes(signed_server.public_bytes(serialization.Encoding.PEM))
    private = serialization.PrivateFormat.PKCS8
    files.key.write_bytes(server_key.private_bytes(serialization.Encoding.PEM, private, serialization.NoEncryption()))
    return files


@dataclass
class ScriptedResolver:
    """Answers the first lookup with `first` and every later one with `then`, keeping each host asked."""

    first: Sequence[str]
    then: Sequence[str] = ()
    lookups: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.lookups.append(host)
        return self.first if len(self.lookups) == 1 else self.then
