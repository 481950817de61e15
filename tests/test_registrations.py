"""The registration store on each backend: entries survive reopening, replace by name, stay per kind."""

from gateway.registrations import RegistrationStore
from tests.support.databases import Backend


def test_a_registration_survives_reopening_the_store(store_backend: Backend) -> None:
    store = RegistrationStore(store_backend.open("registrations"))
    store.save("server", "weather", {"name": "weather", "url": "http://127.0.0.1:9/mcp"})
    store.close()

    reopened = RegistrationStore(store_backend.open("registrations"))
    assert reopened.entries("server") == {"weather": {"name": "weather", "url": "http://127.0.0.1:9/mcp"}}
    reopened.close()


def test_saving_a_name_again_replaces_its_entry_and_kinds_do_not_mix(store_backend: Backend) -> None:
    store = RegistrationStore(store_backend.open("registrations"))
    store.save("server", "x", {"name": "x", "url": "http://a"})
    store.save("server", "x", {"name": "x", "url": "http://b"})
    store.save("group", "x", {"allow": ["x__*"]})

    assert store.entries("server") == {"x": {"name": "x", "url": "http://b"}}
    assert store.entries("group") == {"x": {"allow": ["x__*"]}}
    store.close()


def test_entries_come_in_name_order_whatever_the_database_s_collation(store_backend: Backend) -> None:
    store = RegistrationStore(store_backend.open("registrations"))
    for name in ("b", "B", "a", "_z"):
        store.save("server", name, {"name": name})

    assert list(store.entries("server")) == ["B", "_z", "a", "b"]
    store.close()


def test_removing_reports_whether_there_was_an_entry(store_backend: Backend) -> None:
    store = RegistrationStore(store_backend.open("registrations"))
    store.save("server", "x", {"name": "x"})

    assert store.remove("server", "x") is True
    assert store.remove("server", "x") is False
    assert store.entries("server") == {}
    store.close()
