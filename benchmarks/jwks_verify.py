"""The cost of verifying a bearer token signed with a key of the issuer's JWKS, per request, key cached.

Run `python -m benchmarks.jwks_verify` from the repository root (needs Node and the npm packages of
`.ci/node.sh`). It starts the real OpenID provider of the tests (`oidc-provider`), lets the gateway's
`Authenticator` find its keys by discovery once, then, for a token of each algorithm, times:
- first sight: verifying it with the cached key (the JWT's header, the key, the signature, issuer,
  audience and expiry, the role rules), what a token's first request costs;
- per request: `Authenticator.authenticate` as every request calls it (Bearer header, API-key
  lookup, then the token's identity remembered from its first request, `gateway.auth.verified`).
Each round times `--calls` in a row; the table shows, per algorithm, the median over rounds of the
mean time per call and the p99 of single calls, beside the target (0.1 ms per request).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import anyio

from gateway.auth.authenticator import Authenticator
from gateway.auth.settings import AuthSettings
from gateway.auth.tokens import identity_of, verified_claims
from tests.support.oidc import AUDIENCE, MACHINE_CLIENTS, openid_provider

TARGET_MS = 0.1
ROLE_RULES = [{"claim": "groups", "value": "ops", "role": "admin"}, {"role": "user"}]


def measure(call: Callable[[], object], calls: int) -> tuple[float, list[float]]:
    """The mean milliseconds per call over `calls` in a row, and each one's milliseconds."""
    singles: list[float] = []
    started = time.perf_counter()
    for _ in range(calls):
        before = time.perf_counter()
        call()
        singles.append((time.perf_counter() - before) * 1000)
    return (time.perf_counter() - started) * 1000 / calls, singles


def first_sight(authenticator: Authenticator, token: str) -> Callable[[], object]:
    """Verifying `token` with the cached key, as its first request does."""
    settings = authenticator.settings
    assert settings.jwt is not None
    jwt = settings.jwt
    return lambda: identity_of(verified_claims(token, jwt, authenticator.keys), jwt, settings.known_roles)


def row(name: str, call: Callable[[], object], calls: int, rounds: int) -> str:
    """One line of the table."""
    call()  # warm: PyJWT and the key's algorithm loaded
    means, singles = [], []
    for _ in range(rounds):
        mean, each = measure(call, calls)
        means.append(mean)
        singles.extend(each)
    p99 = statistics.quantiles(singles, n=100)[98]
    spread = f"{min(means):.4f}-{max(means):.4f}"
    return f"{name:<24} {statistics.median(means):>9.4f} {p99:>8.4f} {spread:>16}"


async def tokens_and_authenticator(issuer: str, tokens: dict[str, str]) -> Authenticator:
    """The provider's tokens for each algorithm, and an authenticator whose keys are fetched."""
    from tests.support.oidc import OpenIdProvider

    provider = OpenIdProvider.__new__(OpenIdProvider)
    provider.issuer = issuer
    for algorithm, client in MACHINE_CLIENTS.items():
        tokens[algorithm] = await provider.token(client)
    section = {"jwt": {"issuer": issuer, "audience": AUDIENCE, "role_rules": ROLE_RULES}}
    settings = AuthSettings.from_config(section, source_file="benchmark", known_roles={"admin", "user"})
    authenticator = Authenticator(settings)
    assert authenticator.keys is not None
    await authenticator.keys.refresh()
    return authenticator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000, help="verifications per round (default 5000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per algorithm (default 5)")
    args = parser.parse_args()
    with openid_provider() as provider:
        tokens: dict[str, str] = {}
        authenticator = anyio.run(tokens_and_authenticator, provider.issuer, tokens)
    print(f"{'token':<24} {'mean ms':>9} {'p99 ms':>8} {'range of means':>16}")
    for algorithm, token in tokens.items():
        header = f"Bearer {token}"
        print(row(f"{algorithm} first sight", first_sight(authenticator, token), args.calls, args.rounds))
        print(row(f"{algorithm} per request", partial(authenticator.authenticate, header), args.calls, args.rounds))
    print(f"target: {TARGET_MS} ms per request")


if __name__ == "__main__":
    main()
