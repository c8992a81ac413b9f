"""The collector pause around bulk work, and the CLI's freeze before exit."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from etcdspec.checker.gc_pause import age_survivors, paused_gc
from etcdspec.checker.history import write_history
from etcdspec.checker.simulate import simulate_etcd
from etcdspec.cli.main import run


class _Node:
    """A weak-referenceable object that can sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def collecting() -> Iterator[None]:
    """The collector on, nothing frozen before or after the test."""
    was = gc.isenabled()
    gc.enable()
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if was:
            gc.enable()  # also after a test that switched it off
        else:
            gc.disable()


def test_pause_disables_the_collector_and_restores_it(collecting: None) -> None:
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # only the outermost pause turns collection back on
    assert gc.isenabled()


def test_pause_restores_the_collector_when_the_body_raises(collecting: None) -> None:
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_pause_leaves_a_disabled_collector_disabled(collecting: None) -> None:
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_survivors_of_a_pause_are_old_and_no_collection_is_due(collecting: None) -> None:
    with paused_gc():
        kept = [[i] for i in range(50_000)]
    assert gc.get_count()[0] < 100  # would be ~50,000 without the ageing
    assert gc.get_freeze_count() == 0  # aged, not frozen
    assert len(kept) == 50_000


def test_cycles_made_during_a_pause_are_still_collected(collecting: None) -> None:
    with paused_gc():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
    assert gone() is not None  # a cycle: reference counting alone cannot free it
    gc.collect()
    assert gone() is None


def test_age_survivors_keeps_objects_tracked_and_unfrozen(collecting: None) -> None:
    node = _Node()
    age_survivors()
    assert gc.is_tracked(node)
    assert gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 100


def test_cli_check_freezes_what_it_leaves_before_the_process_exits(
    collecting: None, tmp_path: Path
) -> None:
    path = tmp_path / "history.jsonl"
    write_history(simulate_etcd(0, ops=50, processes=3, info_rate=0.1), path)
    assert gc.get_freeze_count() == 0
    assert run(["check", str(path), "--model", "etcd"]) == 0
    assert gc.get_freeze_count() > 0
