"""`OpenConnections`: at the cap a new connection closes the idlest one that is not answering a request."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.api.open_connections import (
    MAX_LISTEN_BACKLOG,
    MAX_OPEN_CONNECTIONS,
    OpenConnections,
    connection_limit,
    listen_backlog,
)


@dataclass
class RecordingTransport:
    closed: bool = False

    def close(self) -> None:
        self.closed = True


@dataclass(eq=False)
class StubConnection:
    name: str
    answering: bool = False
    transport: RecordingTransport = field(default_factory=RecordingTransport)

    def is_answering(self) -> bool:
        return self.answering


def admitted(room: OpenConnections, *names: str, answering: bool = False) -> list[StubConnection]:
    connections = [StubConnection(name, answering=answering) for name in names]
    for connection in connections:
        assert room.admit(connection)  # type: ignore[arg-type]
    return connections


def closed_names(*groups: list[StubConnection]) -> list[str]:
    return [connection.name for group in groups for connection in group if connection.transport.closed]


def test_under_the_cap_no_connection_is_closed() -> None:
    room = OpenConnections(limit=3)

    opened = admitted(room, "a", "b", "c")

    assert closed_names(opened) == []
    assert len(room) == 3


def test_at_the_cap_a_new_connection_closes_the_one_opened_first() -> None:
    room = OpenConnections(limit=2)
    opened = admitted(room, "a", "b")

    newer = admitted(room, "c", "d")

    assert closed_names(opened, newer) == ["a", "b"]
    assert len(room) == 2


def test_a_connection_that_finished_an_answer_is_closed_after_those_idle_longer() -> None:
    room = OpenConnections(limit=3)
    first, second, third = admitted(room, "a", "b", "c")
    room.touch(first)  # "a" just answered a request: "b" has been idle longest

    newer = admitted(room, "d", "e")

    assert closed_names([first, second, third], newer) == ["b", "c"]


def test_a_connection_answering_a_request_is_never_closed_for_a_new_one() -> None:
    room = OpenConnections(limit=2)
    busy = admitted(room, "busy", answering=True)
    idle = admitted(room, "idle")

    newer = admitted(room, "new")

    assert closed_names(busy, idle, newer) == ["idle"]


def test_when_every_connection_is_answering_the_new_one_is_refused() -> None:
    room = OpenConnections(limit=2)
    busy = admitted(room, "a", "b", answering=True)

    refused = room.admit(StubConnection("c"))  # type: ignore[arg-type]

    assert refused is False
    assert closed_names(busy) == []
    assert len(room) == 2


def test_a_released_connection_frees_its_place() -> None:
    room = OpenConnections(limit=2)
    first, second = admitted(room, "a", "b")
    room.release(first)

    newer = admitted(room, "c")

    assert closed_names([first, second], newer) == []


def test_connections_and_backlog_leave_a_reserve_of_descriptors_or_half_of_a_small_limit() -> None:
    assert (connection_limit(1024), listen_backlog(1024)) == (512, 256)  # 768 = 1,024 - DESCRIPTOR_RESERVE
    assert (connection_limit(256), listen_backlog(256)) == (86, 42)  # 128: half of 256
    assert (connection_limit(1), listen_backlog(1)) == (1, 1)
    assert (connection_limit(1_048_576), listen_backlog(1_048_576)) == (MAX_OPEN_CONNECTIONS, MAX_LISTEN_BACKLOG)
