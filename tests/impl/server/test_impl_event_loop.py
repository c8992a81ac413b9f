"""The member's event loop choice (etcdspec.impl.server.event_loop): ETCDSPEC_EVENT_LOOP, asyncio
when unset; an unknown or missing loop is a clear error, never a fallback."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from etcdspec.impl.server import event_loop
from etcdspec.impl.server.event_loop import EVENT_LOOP_ENV, EventLoopChoiceError

UVLOOP_INSTALLED = importlib.util.find_spec("uvloop") is not None


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_asyncio_when_asked_runs_on_the_standard_loop() -> None:
    module = event_loop.run(_loop_module(), {EVENT_LOOP_ENV: "asyncio"})
    assert module.startswith("asyncio")


def test_unset_means_asyncio_even_when_uvloop_is_installed() -> None:
    assert event_loop.chosen_loop({}) == "asyncio"
    assert event_loop.run(_loop_module(), {}).startswith("asyncio")


def test_uvloop_when_asked_and_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_loop, "_uvloop_installed", lambda: True)
    assert event_loop.chosen_loop({EVENT_LOOP_ENV: "uvloop"}) == "uvloop"
    if UVLOOP_INSTALLED:
        module = event_loop.run(_loop_module(), {EVENT_LOOP_ENV: "uvloop"})
        assert module.startswith("uvloop")


@pytest.mark.parametrize(
    ("value", "says"),
    [("tokio", "not a known event loop"), ("UVLOOP", "not a known event loop")],
)
def test_unknown_loop_is_refused_with_the_choices(value: str, says: str) -> None:
    with pytest.raises(EventLoopChoiceError, match=says) as error:
        event_loop.chosen_loop({EVENT_LOOP_ENV: value})
    assert "uvloop, asyncio" in str(error.value)


def test_uvloop_asked_but_missing_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_loop, "_uvloop_installed", lambda: False)
    with pytest.raises(EventLoopChoiceError, match="not installed"):
        event_loop.chosen_loop({EVENT_LOOP_ENV: "uvloop"})
    with pytest.raises(EventLoopChoiceError, match="not installed"):
        event_loop.run(_loop_module(), {EVENT_LOOP_ENV: "uvloop"})


def test_run_returns_the_result_and_propagates_errors() -> None:
    async def answer() -> int:
        return 42

    async def fail() -> None:
        raise KeyError("boom")

    for loop in ("asyncio", *(["uvloop"] if UVLOOP_INSTALLED else [])):
        assert event_loop.run(answer(), {EVENT_LOOP_ENV: loop}) == 42
        with pytest.raises(KeyError):
            event_loop.run(fail(), {EVENT_LOOP_ENV: loop})
