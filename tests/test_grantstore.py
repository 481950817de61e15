"""The grant store on each backend: grants kept per server and caller, sealed, replaced, listed
without their tokens and forgotten; each server's client kept once; another key reads nothing."""

from __future__ import annotations

import base64

from gateway.stores.grants import GrantStore
from gateway.stores.sealing import Sealer
from tests.support.databases import Backend

KEY = base64.urlsafe_b64encode(b"k" * 32).decode()
OTHER_KEY = base64.urlsafe_b64encode(b"o" * 32).decode()


def test_grants_are_kept_per_server_and_caller_sealed_and_forgotten(store_backend: Backend) -> None:
    store = GrantStore(store_backend.open("grants"), Sealer(KEY))
    try:
        store.save("notes", "api_key:alice", '{"access_token": "a.1"}', 1000.0, 10.0)
        store.save("notes", "api_key:bob", '{"access_token": "b.1"}', None, 11.0)
        store.save("notes", "api_key:alice", '{"access_token": "a.2"}', 2000.0, 12.0)
        alice = store.grant("notes", "api_key:alice")
        assert alice is not None and alice.tokens == '{"access_token": "a.2"}' and alice.expires_at == 2000.0
        assert store.grant("tickets", "api_key:alice") is None
        assert [(grant.caller, grant.tokens) for grant in store.grants("notes")] == [
            ("api_key:bob", ""),
            ("api_key:alice", ""),
        ]
        raw = store_backend.open("grants")
        try:
            stored = [row[0] for row in raw.fetch_all("SELECT tokens FROM upstream_grants")]
        finally:
            raw.close()
        # A dot is outside the sealed text's alphabet (URL-safe base64): found, it is a token in clear.
        assert stored and not any("a.2" in text or "b.1" in text for text in stored)
        assert store.forget("notes", "api_key:alice") is True
        assert store.forget("notes", "api_key:alice") is False
        assert [grant.caller for grant in store.grants()] == ["api_key:bob"]
        store.save_client("notes", '{"client_id": "c1"}')
        store.save_client("notes", '{"client_id": "c2"}')
        assert store.client("notes") == '{"client_id": "c2"}'
    finally:
        store.close()
    other = GrantStore(store_backend.open("grants"), Sealer(OTHER_KEY))
    try:
        assert other.grant("notes", "api_key:bob") is None
        assert other.client("notes") is None
    finally:
        other.close()
