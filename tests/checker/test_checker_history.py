"""History format: the reader validates (line numbers), the writer round-trips, bytes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from etcdspec.checker.history import (
    SCHEMA_VERSION,
    HistoryError,
    HistoryEvent,
    decode_bytes,
    encode_bytes,
    load_schema,
    parse_history_text,
    read_history,
    write_history,
)
from etcdspec.checker.simulate import simulate_etcd, simulate_register

GOOD = [
    {
        "index": 0,
        "process": 3,
        "type": "invoke",
        "f": "put",
        "value": {"key": "a", "value": "1"},
        "time": 1200,
    },
    {
        "index": 1,
        "process": 3,
        "type": "ok",
        "f": "put",
        "value": {"header": {"revision": 2}},
        "time": 1830,
    },
]


def _text(lines: list[dict[str, object]]) -> str:
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def test_design_example_reads_into_one_ok_operation() -> None:
    history = parse_history_text(_text(GOOD))
    assert len(history.operations) == 1
    op = history.operations[0]
    assert (op.type, op.f, op.call, op.ret) == ("ok", "put", 0, 1)
    assert op.response == {"header": {"revision": 2}}


BAD_CASES = [
    ("not json", ["{nope"], 1, "not valid JSON"),
    ("missing field", [{"index": 0, "process": 1, "type": "invoke", "f": "put"}], 1, '"time"'),
    (
        "unknown type",
        [{"index": 0, "process": 1, "type": "done", "f": "put", "time": 1}],
        1,
        "type",
    ),
    (
        "unknown field",
        [{"index": 0, "process": 1, "type": "invoke", "f": "x", "time": 1, "z": 0}],
        1,
        '"z"',
    ),
    (
        "two open operations",
        [
            {"index": 0, "process": 1, "type": "invoke", "f": "put", "time": 1},
            {"index": 1, "process": 1, "type": "invoke", "f": "get", "time": 2},
        ],
        2,
        "one operation at a time",
    ),
    (
        "return before call",
        [{"index": 0, "process": 1, "type": "ok", "f": "put", "time": 1}],
        1,
        "return before its call",
    ),
    (
        "op after info",
        [
            {"index": 0, "process": 1, "type": "invoke", "f": "put", "time": 1},
            {"index": 1, "process": 1, "type": "info", "f": "put", "time": 2},
            {"index": 2, "process": 1, "type": "invoke", "f": "put", "time": 3},
        ],
        3,
        "after its info",
    ),
    (
        "time backwards",
        [
            {"index": 0, "process": 1, "type": "invoke", "f": "put", "time": 5},
            {"index": 1, "process": 1, "type": "ok", "f": "put", "time": 4},
        ],
        2,
        "backwards",
    ),
    (
        "completion of another f",
        [
            {"index": 0, "process": 1, "type": "invoke", "f": "put", "time": 1},
            {"index": 1, "process": 1, "type": "ok", "f": "get", "time": 2},
        ],
        2,
        "invoked put",
    ),
]


@pytest.mark.parametrize(
    ("name", "lines", "line", "needle"), BAD_CASES, ids=[c[0] for c in BAD_CASES]
)
def test_malformed_history_is_rejected_with_its_line(
    name: str, lines: list[object], line: int, needle: str
) -> None:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    with pytest.raises(HistoryError) as caught:
        parse_history_text(text, source="h.jsonl")
    assert caught.value.line == line
    assert needle in str(caught.value)
    assert str(caught.value).startswith(f"h.jsonl:{line}:")


def test_unfinished_invoke_becomes_info_with_a_note() -> None:
    history = parse_history_text(_text(GOOD[:1]))
    assert history.operations[0].type == "info"
    assert history.notes and "never completed" in history.notes[0]


@pytest.mark.parametrize("events", [simulate_etcd(3, ops=120), simulate_register(4, ops=60)])
def test_writer_and_reader_round_trip(events: list[HistoryEvent], tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    write_history(events, path)
    again = read_history(path)
    assert [e.to_json() for e in again.events] == [e.to_json() for e in events]
    out = io.StringIO()
    write_history(again.events, out)
    assert out.getvalue() == path.read_text()


@pytest.mark.parametrize(
    ("data", "encoded"),
    [(b"abc", "abc"), (b"", ""), (b"\xff\x00", {"b64": "/wA="}), ("é".encode(), "é")],
)
def test_bytes_encode_as_text_or_b64(data: bytes, encoded: object) -> None:
    assert encode_bytes(data) == encoded
    assert decode_bytes(encoded) == data


def test_schema_is_versioned_and_lists_the_event_types() -> None:
    schema = load_schema()
    assert schema["x-etcdspec-schema-version"] == SCHEMA_VERSION == 2
    assert schema["properties"]["type"]["enum"] == ["invoke", "ok", "fail", "info", "watch"]


def test_version_2_carries_the_user_and_version_1_reads_unchanged() -> None:
    with_user = [dict(GOOD[0], user="alice"), *GOOD[1:]]
    history = parse_history_text("\n".join(json.dumps(line) for line in with_user))
    assert history.operations[0].user == "alice"
    assert "as alice" in history.operations[0].describe()
    old = parse_history_text("\n".join(json.dumps(line) for line in GOOD))
    assert old.operations[0].user is None
    out = io.StringIO()
    write_history(history.events, out)
    assert '"f":"' in out.getvalue() and '"user":"alice"' in out.getvalue()
    assert parse_history_text(out.getvalue()).operations[0].user == "alice"
    with pytest.raises(HistoryError, match="user"):
        parse_history_text(json.dumps(dict(GOOD[0], user=7)))


def test_newer_schema_version_is_refused() -> None:
    line = dict(GOOD[0], schema_version=99)
    with pytest.raises(HistoryError, match="newer"):
        parse_history_text(json.dumps(line))
