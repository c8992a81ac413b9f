"""The history reader's plain loop in C (checker/_histread.c) reads a file whose every
line is plainly valid and paired, and declines anything else (the Python loop then
reads it all): either way the History, field by field, or the error must be the Python
loop's."""

from __future__ import annotations

import contextlib
import json
import tracemalloc
from typing import Any

import pytest
from result_fields import history_fields

from etcdspec.checker import history as history_module
from etcdspec.checker.history import (
    HistoryError,
    event_line,
    parse_history_text,
)
from etcdspec.checker.simulate import simulate_etcd, simulate_register

assert history_module._read_plain is not None, "the C reader is built with the package"


def _read(text: str, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | str:
    monkeypatch.setattr(history_module, "_COMPILED_READ", compiled)
    try:
        return history_fields(parse_history_text(text, "h.jsonl"))
    except HistoryError as error:
        return f"error: {error}"


class _Counted:
    """`_read_plain`, counting what it took and declined."""

    def __init__(self) -> None:
        self.taken = 0
        self.declined = 0
        self.read = history_module._read_plain

    def __call__(self, *args: Any) -> Any:
        assert self.read is not None
        found = self.read(*args)
        if found is None:
            self.declined += 1
        else:
            self.taken += 1
        return found


def _compared(text: str, monkeypatch: pytest.MonkeyPatch) -> _Counted:
    counted = _Counted()
    monkeypatch.setattr(history_module, "_read_plain", counted)
    assert _read(text, True, monkeypatch) == _read(text, False, monkeypatch)
    return counted


def _text(events: Any) -> str:
    return "".join(event_line(event) + "\n" for event in events)


@pytest.mark.parametrize(
    "events",
    [
        simulate_etcd(0, ops=300, processes=5, info_rate=0.05),
        simulate_etcd(1, ops=300, processes=12, info_rate=0.2, leases=True, watch=True),
        simulate_etcd(2, ops=200, processes=30, info_rate=0.1, watch=True),
        simulate_register(3, ops=300, processes=5, info_rate=0.1),
    ],
    ids=["etcd", "etcd leases watch", "etcd 30 processes", "register"],
)
def test_simulated_histories_read_as_the_python_loop_reads_them(
    events: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _compared(_text(events), monkeypatch)
    assert counted.taken == 1 and counted.declined == 0


def _line(index: int, process: Any, kind: str, f: str, **extra: Any) -> dict[str, Any]:
    return {"index": index, "process": process, "type": kind, "f": f, "time": index, **extra}


OPEN = [
    _line(0, 1, "invoke", "put", value={"key": "a", "value": "1"}),
    _line(1, "w", "watch", "watch", value={"events": []}),
    _line(2, 2, "invoke", "range", value={"key": "a"}),
    _line(3, 1, "ok", "put", value={"header": {"revision": 2}}),
    _line(4, 2, "info", "range"),
    _line(5, 3, "invoke", "delete", value={"key": "a"}, user="alice"),
    _line(6, 3, "fail", "delete", error="permission denied"),
    _line(7, 4, "invoke", "put", value={"key": "b", "value": "2"}),
]


def test_plain_lines_with_every_kind_and_an_open_invoke_are_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted = _compared("".join(json.dumps(obj) + "\n" for obj in OPEN), monkeypatch)
    assert counted.taken == 1


@pytest.mark.parametrize(
    "digits",
    [
        "999999999999999999",
        "-999999999999999999",
        "1" * 18,
        "7587869185929184775",  # an etcd lease id: the stdlib decodes the line
        "-9999999999999999999",  # orjson would read a float
        "123456789012345678901234567890",
    ],
)
def test_lines_with_digit_runs_are_taken(digits: str, monkeypatch: pytest.MonkeyPatch) -> None:
    invoke = _line(0, 1, "invoke", "put", value={"lease": "LEASE"})
    ok = _line(1, 1, "ok", "put", value="VALUE")
    text = "\n".join(json.dumps(obj) for obj in (invoke, ok))
    text = text.replace('"LEASE"', digits).replace("VALUE", digits)
    counted = _compared(text, monkeypatch)
    assert counted.taken == 1
    monkeypatch.setattr(history_module, "_COMPILED_READ", True)
    lease = parse_history_text(text, "h.jsonl").operations[0].request["lease"]
    assert type(lease) is int and str(lease) == digits


DECLINED = {
    "a blank line": [OPEN[0], "", OPEN[3]],
    "schema_version": [{**OPEN[0], "schema_version": 2}, OPEN[3]],
    "index a bool": [{**OPEN[0], "index": False}, OPEN[3]],
    "index a float": [{**OPEN[0], "index": 0.0}, OPEN[3]],
    "index negative": [{**OPEN[0], "index": -1}, OPEN[3]],
    "index beyond 64 bits": [OPEN[0], {**OPEN[3], "index": 2**64}],
    "time beyond 64 bits": [OPEN[0], {**OPEN[3], "time": 2**63}],
    "process a float": [{**OPEN[0], "process": 1.0}, OPEN[3]],
    "process null": [{**OPEN[0], "process": None}, OPEN[3]],
    "an unknown type": [{**OPEN[0], "type": "begin"}, OPEN[3]],
    "an empty f": [{**OPEN[0], "f": ""}, OPEN[3]],
    "user null": [{**OPEN[0], "user": None}, OPEN[3]],
    "user a number": [{**OPEN[0], "user": 7}, OPEN[3]],
    "an unknown field": [{**OPEN[0], "extra": 1}, OPEN[3]],
    "a list": [[1, 2], OPEN[3]],
    "not JSON": ["{nope", OPEN[3]],
    "NaN": ['{"index":0,"process":1,"type":"invoke","f":"put","value":NaN,"time":0}'],
    "the index does not increase": [OPEN[0], {**OPEN[3], "index": 0}],
    "time goes backwards": [{**OPEN[0], "time": 5}, {**OPEN[3], "time": 4}],
    "a second invoke while one is open": [OPEN[0], {**OPEN[2], "process": 1}],
    "a completion with no invoke": [OPEN[3]],
    "completing another f": [OPEN[0], {**OPEN[3], "f": "range"}],
    "invoking after info": [OPEN[2], OPEN[4], {**OPEN[5], "process": 2}],
    "a long digit run with text after the value": [
        '{"index":0,"process":1,"type":"invoke","f":"put","value":{"lease":'
        '7587869185929184775},"time":0} ',
        OPEN[3],
    ],
    "an escaped lone surrogate": [_line(0, 1, "invoke", "put", value={"key": "\ud800"})],
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_anything_but_plain_paired_lines_is_left_to_the_python_loop(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = DECLINED[name]
    text = "".join((obj if isinstance(obj, str) else json.dumps(obj)) + "\n" for obj in lines)
    counted = _compared(text, monkeypatch)
    assert counted.taken == 0


def test_reading_again_and_again_keeps_no_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reference counts in the C loop: taken and declined reads, repeated, leave nothing
    behind (a leak of one object per line would be tens of KB per read here)."""
    plain = _text(simulate_etcd(4, ops=200, processes=5, info_rate=0.1))
    broken = plain + json.dumps(OPEN[3]) + "\n"  # a completion with no invoke, at the end

    def read_all() -> None:
        for text in (plain, broken):
            with contextlib.suppress(HistoryError):
                parse_history_text(text, "h.jsonl")

    read_all()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):
            read_all()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20_000, grown
