"""`launcher.free_ports` plans below the kernel's ephemeral range, where no outgoing
connection is given a port between planning and the member's bind, and never hands out a
port twice in one process."""

from __future__ import annotations

import socket

import pytest

from etcdspec.impl.tools import launcher


def test_ports_are_planned_below_the_ephemeral_range_and_never_twice() -> None:
    low, high = launcher.planned_port_range()
    planned = [port for _ in range(20) for port in launcher.free_ports(5)]
    assert len(set(planned)) == len(planned) == 100
    assert all(low <= port < high for port in planned), (low, high, planned)


def _bind_run(first: int, count: int) -> list[socket.socket] | None:
    """`count` consecutive ports from `first`, each bound here; None if one is taken."""
    held: list[socket.socket] = []
    for port in range(first, first + count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.append(sock)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            for taken in held:
                taken.close()
            return None
    return held


def test_a_port_in_use_is_not_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a range of 12 ports of which 9 are bound here, the 3 free ones are planned."""
    first = 20_000
    while (held := _bind_run(first, 12)) is None:
        first += 12
    try:
        monkeypatch.setattr(launcher, "planned_port_range", lambda: (first, first + 12))
        monkeypatch.setattr(launcher, "_PLANNED", set())
        for sock in held[::4]:
            sock.close()
        assert sorted(launcher.free_ports(3)) == [first, first + 4, first + 8]
    finally:
        for sock in held:
            sock.close()
