"""Find_Tools' embeddings in their store, on SQLite and on PostgreSQL."""

from __future__ import annotations

from gateway.stores.vectors import VectorStore
from tests.support.databases import Backend


def test_vectors_stored_by_one_process_are_found_by_another_under_the_same_model(store_backend: Backend) -> None:
    first, second = VectorStore(store_backend.open("vectors")), VectorStore(store_backend.open("vectors"))
    try:
        first.put("model-a", {"f1": b"\x00\x00\x80?", "f2": b"\x00\x00\x00@"})
        assert second.get("model-a", ["f1", "f2", "f3"]) == {"f1": b"\x00\x00\x80?", "f2": b"\x00\x00\x00@"}
        assert second.get("model-b", ["f1"]) == {}
    finally:
        first.close()
        second.close()


def test_a_vector_stored_twice_keeps_its_first_bytes_and_many_are_asked_at_once(store_backend: Backend) -> None:
    store = VectorStore(store_backend.open("vectors"))
    try:
        store.put("m", {"f": b"first"})
        store.put("m", {"f": b"second"})
        many = {f"k{number}": bytes([number % 256]) for number in range(1200)}
        store.put("m", many)
        assert store.get("m", ["f"]) == {"f": b"first"}
        assert store.get("m", list(many)) == many
    finally:
        store.close()
