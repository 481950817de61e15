"""The name store on each backend: owners and risk floors survive reopening, a claim never takes an
owned name, a floor never falls, and freeing a server's names keeps their floors."""

from gateway.catalog.ownership import NameChanges
from gateway.catalog.tools import Risk
from gateway.stores.names import NameStore
from tests.support.databases import Backend


def test_owners_and_floors_survive_reopening_the_store(store_backend: Backend) -> None:
    store = NameStore(store_backend.open("names"))
    owners = store.keep(NameChanges(claimed={"calc__evaluate": "calc"}, raised={"python__run_python": Risk.HIGH}))
    store.close()

    reopened = NameStore(store_backend.open("names"))
    assert owners == {"calc__evaluate": "calc"}
    assert sorted(reopened.rows()) == [("calc__evaluate", "calc", None), ("python__run_python", None, Risk.HIGH)]
    reopened.close()


def test_a_name_claimed_first_by_one_process_stays_its_own_when_another_claims_it(store_backend: Backend) -> None:
    first, second = NameStore(store_backend.open("names")), NameStore(store_backend.open("names"))
    first.keep(NameChanges(claimed={"echo": "one"}))

    assert second.keep(NameChanges(claimed={"echo": "two", "other": "two"})) == {"echo": "one", "other": "two"}
    first.close()
    second.close()


def test_a_floor_only_rises_and_freeing_an_owner_s_names_keeps_their_floors(store_backend: Backend) -> None:
    store = NameStore(store_backend.open("names"))
    store.keep(NameChanges(claimed={"run": "python", "echo": "toy"}, raised={"run": Risk.HIGH}))
    store.keep(NameChanges(raised={"run": Risk.LOW, "echo": Risk.MEDIUM}))
    store.keep(NameChanges(released=("python",), claimed={"echo": "other"}))

    assert sorted(store.rows()) == [("echo", "toy", Risk.MEDIUM), ("run", None, Risk.HIGH)]
    assert store.keep(NameChanges(claimed={"run": "plain"})) == {"run": "plain"}
    store.close()
