"""The members' agreement at the end of a run (conform/consistency.py): members
that applied the same log (same raft applied index) but hold stores at different
revisions have diverged — whatever HashKV can or cannot be asked of them."""

from __future__ import annotations

import pytest

from etcdspec.conform.consistency import MemberState, diverged


def _states(*shape: tuple[int, int]) -> list[MemberState]:
    return [
        MemberState(f"http://127.0.0.1:{2379 + n}", "3.5.1", applied, revision)
        for n, (applied, revision) in enumerate(shape)
    ]


@pytest.mark.parametrize(
    ("shape", "split"),
    [
        (((100, 50), (100, 50), (100, 50)), False),  # one log, one store
        (((100, 50), (100, 48), (100, 50)), True),  # one log, a member lost two writes
        (((100, 50), (100, 51), (100, 50)), True),  # one log, a member wrote outside it
        (((100, 50), (98, 48), (100, 50)), False),  # a member still catching up
        (((100, 50), (98, 50), (100, 50)), False),  # behind in the log, same store
        (((100, 50),), False),  # one member cannot disagree
    ],
)
def test_same_log_different_store_is_divergence(
    shape: tuple[tuple[int, int], ...], split: bool
) -> None:
    assert diverged(_states(*shape)) is split


def test_member_state_text_names_port_version_index_and_revision() -> None:
    (state,) = _states((7, 3))
    assert state.describe() == "2379 (etcd 3.5.1): applied index 7, revision 3"
