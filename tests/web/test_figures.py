"""The dashboard's server health from the events of one or several replicas (pure): one lane per
server, or one per server and replica when several told of it in the window at once."""

from __future__ import annotations

from gateway.stores.serverevents import RESTART, ServerEvent
from gateway.web.figures import Health, health

START, END = 1000.0, 2000.0


def lanes(found: list[Health]) -> list[tuple[str, list[tuple[float, float, str]], list[float]]]:
    """Each lane's name, its segments and the times of its marks."""
    return [
        (lane.name, [(s.start, s.end, s.state) for s in lane.segments], [m.epoch for m in lane.marks]) for lane in found
    ]


def test_two_replicas_telling_of_a_server_at_once_get_a_lane_each_rather_than_one_that_flaps() -> None:
    events = [
        ServerEvent(900, "calc", "ready", replica="b"),
        ServerEvent(950, "calc", "ready", replica="a"),
        ServerEvent(1200, "calc", "failed", replica="a"),
        ServerEvent(1300, "calc", "ready", replica="b"),
        ServerEvent(1400, "calc", RESTART, replica="a"),
        ServerEvent(1400, "calc", "ready", replica="a"),
        ServerEvent(1500, "other", "ready", replica="a"),
    ]
    assert lanes(health(events, ["calc", "other"], START, END)) == [
        ("calc on a", [(1000, 1200, "ready"), (1200, 1400, "failed"), (1400, 2000, "ready")], [1400]),
        ("calc on b", [(1000, 2000, "ready")], []),
        ("other", [(1500, 2000, "ready")], []),
    ]


def test_a_replica_that_stopped_before_the_next_began_shares_the_servers_one_lane() -> None:
    events = [
        ServerEvent(500, "calc", "ready", replica="old"),
        ServerEvent(1200, "calc", "stopped", replica="old"),
        ServerEvent(1250, "calc", "connecting", replica="new"),
        ServerEvent(1260, "calc", "ready", replica="new"),
    ]
    assert lanes(health(events, ["calc"], START, END)) == [
        (
            "calc",
            [(1000, 1200, "ready"), (1200, 1250, "stopped"), (1250, 1260, "connecting"), (1260, 2000, "ready")],
            [],
        )
    ]


def test_without_events_in_the_window_the_newest_state_any_replica_saw_before_holds() -> None:
    events = [ServerEvent(200, "calc", "failed", replica="a"), ServerEvent(300, "calc", "ready", replica="b")]
    assert lanes(health(events, ["calc", "idle"], START, END)) == [
        ("calc", [(1000, 2000, "ready")], []),
        ("idle", [], []),
    ]
