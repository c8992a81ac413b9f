"""The reader pairs invokes and completions while it reads the lines (`_Pairing`): the
History it gives must be `build_history`'s of the same events, field by field, and a
history that breaks an ordering rule must get `build_history`'s own error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from result_fields import history_fields

from etcdspec.checker.history import (
    History,
    HistoryError,
    build_history,
    event_line,
    parse_event,
    parse_history_text,
)
from etcdspec.checker.simulate import simulate_etcd


def _careful(text: str) -> History:
    """The same text read line by line through the full schema walk, then paired by
    `build_history` (the reader's path before the pairing was folded into it)."""
    events = [
        parse_event(json.loads(raw), "h.jsonl", number)
        for number, raw in enumerate(text.splitlines(), start=1)
        if raw.strip()
    ]
    return build_history(events, "h.jsonl")


def _lines(*objs: dict[str, Any]) -> str:
    return "".join(json.dumps(obj) + "\n" for obj in objs)


def _ev(index: int, process: int | str, kind: str, f: str, **extra: Any) -> dict[str, Any]:
    return {"index": index, "process": process, "type": kind, "f": f, "time": index, **extra}


MIXED = _lines(
    _ev(0, 1, "invoke", "put", value={"key": "a", "value": "1"}),
    _ev(1, "w", "watch", "watch", value={"events": []}),
    {**_ev(2, 2, "invoke", "range", value={"key": "a"}), "schema_version": 2},
    _ev(3, 1, "ok", "put", value={"header": {"revision": 2}}),
    _ev(4, 2, "info", "range"),
    _ev(5, 3, "invoke", "delete", value={"key": "a"}, user="alice"),
    _ev(6, 3, "fail", "delete", error="permission denied"),
    _ev(7, 4, "invoke", "put", value={"key": "b", "value": "2"}),
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulated_histories_read_as_build_history_pairs_them(seed: int) -> None:
    events = simulate_etcd(seed, ops=300, processes=7, info_rate=0.1, watch=True)
    text = "".join(event_line(event) + "\n" for event in events)
    assert history_fields(parse_history_text(text, "h.jsonl")) == history_fields(_careful(text))


def test_mixed_lines_watch_events_and_an_open_invoke() -> None:
    # A schema_version line takes the full walk; the open invoke becomes info with a note.
    read = parse_history_text(MIXED, "h.jsonl")
    assert history_fields(read) == history_fields(_careful(MIXED))
    assert [op.type for op in read.operations] == ["ok", "info", "fail", "info"]
    assert len(read.watch_events) == 1 and len(read.notes) == 1


@pytest.mark.parametrize(
    "objs",
    [
        # the index does not increase
        (_ev(0, 1, "invoke", "put"), _ev(0, 1, "ok", "put")),
        # time goes backwards
        ({**_ev(0, 1, "invoke", "put"), "time": 5}, {**_ev(1, 1, "ok", "put"), "time": 3}),
        # a second invoke while one is open
        (_ev(0, 1, "invoke", "put"), _ev(1, 1, "invoke", "range")),
        # a completion with no invoke
        (_ev(0, 1, "ok", "put"),),
        # completing another f
        (_ev(0, 1, "invoke", "put"), _ev(1, 1, "ok", "range")),
        # invoking after info
        (_ev(0, 1, "invoke", "put"), _ev(1, 1, "info", "put"), _ev(2, 1, "invoke", "put")),
        # the break on a line read by the full walk
        (_ev(0, 1, "invoke", "put"), {**_ev(1, 1, "invoke", "put"), "schema_version": 2}),
    ],
)
def test_an_order_that_breaks_a_rule_gets_build_history_s_error(
    objs: tuple[dict[str, Any], ...],
) -> None:
    text = _lines(*objs)
    with pytest.raises(HistoryError) as careful:
        _careful(text)
    with pytest.raises(HistoryError) as read:
        parse_history_text(text, "h.jsonl")
    assert str(read.value) == str(careful.value)


def test_invokes_never_completed_keep_their_place_among_the_operations() -> None:
    # Operation ids follow the invokes' order whatever completes when: an open invoke
    # early, one late, a fail and an info between them; the notes in build_history's order.
    text = _lines(
        _ev(0, 1, "invoke", "put", value={"key": "a", "value": "1"}),
        _ev(1, 2, "invoke", "range", value={"key": "a"}),
        _ev(2, 3, "invoke", "delete", value={"key": "a"}),
        _ev(3, 3, "fail", "delete", error="boom"),
        _ev(4, 2, "ok", "range", value={"header": {"revision": 1}}),
        _ev(5, 4, "invoke", "put", value={"key": "b", "value": "2"}),
        _ev(6, 2, "invoke", "range", value={"key": "b"}),
        _ev(7, 2, "info", "range"),
        _ev(8, 5, "invoke", "put", value={"key": "c", "value": "3"}),
    )
    read = parse_history_text(text, "h.jsonl")
    assert history_fields(read) == history_fields(_careful(text))
    assert [(op.id, op.process, op.type) for op in read.operations] == [
        (0, 1, "info"),
        (1, 2, "ok"),
        (2, 3, "fail"),
        (3, 4, "info"),
        (4, 2, "info"),
        (5, 5, "info"),
    ]
    assert len(read.notes) == 3
