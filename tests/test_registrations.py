from pathlib import Path

from gateway.registrations import RegistrationStore


def test_a_registration_survives_reopening_the_store(tmp_path: Path) -> None:
    store = RegistrationStore(tmp_path / "registrations.db")
    store.save("server", "weather", {"name": "weather", "url": "http://127.0.0.1:9/mcp"})
    store.close()

    reopened = RegistrationStore(tmp_path / "registrations.db")
    assert reopened.entries("server") == {"weather": {"name": "weather", "url": "http://127.0.0.1:9/mcp"}}
    reopened.close()


def test_saving_a_name_again_replaces_its_entry_and_kinds_do_not_mix(tmp_path: Path) -> None:
    store = RegistrationStore(tmp_path / "registrations.db")
    store.save("server", "x", {"name": "x", "url": "http://a"})
    store.save("server", "x", {"name": "x", "url": "http://b"})
    store.save("group", "x", {"allow": ["x__*"]})

    assert store.entries("server") == {"x": {"name": "x", "url": "http://b"}}
    assert store.entries("group") == {"x": {"allow": ["x__*"]}}
    store.close()


def test_removing_reports_whether_there_was_an_entry(tmp_path: Path) -> None:
    store = RegistrationStore(tmp_path / "registrations.db")
    store.save("server", "x", {"name": "x"})

    assert store.remove("server", "x") is True
    assert store.remove("server", "x") is False
    assert store.entries("server") == {}
    store.close()
