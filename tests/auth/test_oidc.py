"""Tokens from a real OpenID provider (`oidc-provider`): keys found by discovery, rotated keys, removed
keys, a key set that fails to load and a provider that is down."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError
from gateway.auth.oidc import UNKNOWN_KID_INTERVAL, IssuerKeys
from gateway.auth.settings import AuthSettings
from gateway.web.signin import WebSessions
from tests.support.oidc import AUDIENCE, MACHINE_CLIENTS, OpenIdProvider, openid_provider

pytestmark = pytest.mark.anyio

ROLE_RULES = [
    {"claim": "groups", "value": "ops", "role": "admin"},
    {"claim": "groups", "value": "staff", "role": "analyst"},
]
ROLES = {"admin", "analyst", "intern"}


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def provider() -> Iterator[OpenIdProvider]:
    with openid_provider() as running:
        yield running


def authenticator(issuer: str, clock: Clock, **jwt: Any) -> Authenticator:
    """An authenticator taking the provider's tokens, its key cache on `clock`."""
    section = {"jwt": {"issuer": issuer, "audience": AUDIENCE, "role_rules": ROLE_RULES, **jwt}}
    settings = AuthSettings.from_config(section, source_file="gateway.yaml", known_roles=ROLES)
    return Authenticator(settings, keys=lambda issuer, algorithms: IssuerKeys(issuer, algorithms, clock=clock))


@pytest.mark.parametrize("algorithm", list(MACHINE_CLIENTS))
async def test_a_token_signed_with_each_algorithm_is_verified_with_keys_found_by_discovery(
    provider: OpenIdProvider, algorithm: str
) -> None:
    client = MACHINE_CLIENTS[algorithm]
    identity = await authenticator(provider.issuer, Clock()).identify(f"Bearer {await provider.token(client)}")
    assert (identity.caller, identity.method, identity.issuer) == (client, "jwt", provider.issuer)
    # svc-es256 is in "staff" and "ops": the first rule that matches wins.
    assert identity.role == {"RS256": "admin", "PS256": "analyst", "ES256": "admin", "EdDSA": "analyst"}[algorithm]


async def test_a_token_whose_claims_match_no_rule_is_refused(provider: OpenIdProvider) -> None:
    gate = authenticator(provider.issuer, Clock(), role_rules=[{"claim": "groups", "value": "board", "role": "admin"}])
    with pytest.raises(AuthenticationError, match=r"match no rule of auth\.jwt\.role_rules"):
        await gate.identify(f"Bearer {await provider.token()}")


async def test_a_rule_without_a_claim_gives_every_verified_token_its_role(provider: OpenIdProvider) -> None:
    gate = authenticator(provider.issuer, Clock(), role_rules=[{"role": "intern"}])
    assert (await gate.identify(f"Bearer {await provider.token()}")).role == "intern"


async def test_tokens_signed_by_a_rotated_in_key_work_without_a_restart_and_the_removed_key_is_refused(
    provider: OpenIdProvider,
) -> None:
    clock = Clock()
    gate = authenticator(provider.issuer, clock)
    old = await provider.token("svc-es256")
    assert (await gate.identify(f"Bearer {old}")).caller == "svc-es256"
    held = gate.keys.kids() if gate.keys else []
    await provider.rotate()
    new = await provider.token("svc-es256")
    # Right after a fetch the rate limit holds: the new key is not fetched yet.
    with pytest.raises(AuthenticationError, match=r"signed with the key 'es256-2', which .* does not publish"):
        await gate.identify(f"Bearer {new}")
    clock.now += UNKNOWN_KID_INTERVAL
    assert (await gate.identify(f"Bearer {new}")).caller == "svc-es256"
    assert gate.keys is not None and "es256-2" in gate.keys.kids() and "es256-1" not in gate.keys.kids()
    assert "es256-1" in held
    with pytest.raises(AuthenticationError, match=r"signed with the key 'es256-1', which .* does not publish"):
        await gate.identify(f"Bearer {old}")


async def test_made_up_key_ids_do_not_make_the_gateway_fetch_keys_again_and_again(provider: OpenIdProvider) -> None:
    clock = Clock()
    gate = authenticator(provider.issuer, clock)
    await gate.identify(f"Bearer {await provider.token()}")
    assert gate.keys is not None
    fetched = gate.keys.seconds_left()
    await provider.rotate()
    forged = await provider.token()  # signed by a key the cache does not hold, like a forged kid
    for _ in range(5):
        with pytest.raises(AuthenticationError, match="does not publish"):
            await gate.identify(f"Bearer {forged}")
    # No fetch happened: the keys' expiry, set at each fetch, has not moved.
    assert gate.keys.seconds_left() == fetched


async def test_a_key_set_that_fails_to_load_refuses_tokens_and_tells_the_admin(
    provider: OpenIdProvider, caplog: pytest.LogCaptureFixture
) -> None:
    token = await provider.token()
    await provider.break_keys()
    gate = authenticator(provider.issuer, Clock())
    with caplog.at_level(logging.WARNING, "gateway.auth.oidc"), pytest.raises(AuthenticationError) as refused:
        await gate.identify(f"Bearer {token}")
    assert "cannot verify tokens" in refused.value.message and "/readyz" in refused.value.message
    assert "HTTP 500" not in refused.value.message  # the provider's trouble is for admins
    assert gate.keys is not None and gate.keys.error is not None and "answered HTTP 500" in gate.keys.error
    assert "answered HTTP 500" in caplog.text and "Traceback" not in caplog.text


async def test_a_provider_that_is_down_is_reported_and_keys_fetched_before_keep_working(
    provider: OpenIdProvider,
) -> None:
    clock = Clock()
    gate = authenticator(provider.issuer, clock)
    token = await provider.token()
    await gate.identify(f"Bearer {token}")
    provider.stop()
    reports: list[tuple[str, str | None]] = []
    reported = anyio.Event()

    def report(name: str, error: str | None) -> None:
        reports.append((name, error))
        reported.set()

    clock.now += 7200  # the keys expired: `maintain` fetches them and fails
    async with anyio.create_task_group() as group:
        group.start_soon(gate.maintain_keys, report)
        await reported.wait()
        group.cancel_scope.cancel()
    [(name, error)] = reports
    assert name == "identity_provider" and error is not None and "cannot reach the identity provider" in error
    # The cached keys still verify the token: an outage of the provider locks nobody out.
    assert (await gate.identify(f"Bearer {token}")).caller == "svc-rs256"


async def test_a_provider_down_from_the_start_refuses_tokens_with_a_clear_reason() -> None:
    with openid_provider() as provider:
        token, issuer = await provider.token(), provider.issuer
    gate = authenticator(issuer, Clock())
    with pytest.raises(AuthenticationError, match=f"cannot verify tokens of {issuer} now"):
        await gate.identify(f"Bearer {token}")
    assert gate.keys is not None and gate.keys.error is not None and "cannot reach" in gate.keys.error


async def test_a_discovery_document_naming_another_issuer_is_refused(provider: OpenIdProvider) -> None:
    # The same provider under another name (localhost for 127.0.0.1): its document names the other.
    other = provider.issuer.replace("127.0.0.1", "localhost")
    gate = authenticator(other, Clock())
    with pytest.raises(AuthenticationError, match="cannot verify tokens"):
        await gate.identify(f"Bearer {await provider.token()}")
    assert gate.keys is not None and gate.keys.error is not None and "names the issuer" in gate.keys.error


async def test_a_reload_applies_new_role_rules_to_a_token_verified_before_and_keeps_the_issuers_keys(
    provider: OpenIdProvider,
) -> None:
    clock = Clock()
    gate = authenticator(provider.issuer, clock)
    token = f"Bearer {await provider.token()}"
    assert (await gate.identify(token)).role == "admin"
    keys = gate.keys
    section = {"jwt": {"issuer": provider.issuer, "audience": AUDIENCE, "role_rules": [{"role": "intern"}]}}
    gate.settings = AuthSettings.from_config(section, source_file="gateway.yaml", known_roles=ROLES)
    assert gate.authenticate(token).role == "intern"  # no fetch needed: the same issuer's keys
    assert gate.keys is keys


async def test_a_token_of_a_rotated_in_key_pasted_on_the_web_page_signs_in(provider: OpenIdProvider) -> None:
    clock = Clock()
    gate = authenticator(provider.issuer, clock)
    await gate.identify(f"Bearer {await provider.token()}")
    await provider.rotate()
    token = await provider.token("svc-eddsa")
    clock.now += UNKNOWN_KID_INTERVAL
    sessions = WebSessions(lambda: gate)
    session = await gate.with_fresh_keys(lambda: sessions.sign_in(None, token))
    assert (session.identity.caller, session.identity.role) == ("svc-eddsa", "analyst")
