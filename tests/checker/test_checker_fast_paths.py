"""The reading fast paths give exactly what the careful paths give: the etcd JSON decoders
(a message whose fields all have their exact JSON types is read in one go, and equal
reads share one immutable message) and the history reader (one raw_decode per line,
the schema walk only for lines that are not plainly valid)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from etcdspec.checker import etcd_json
from etcdspec.checker.etcd_json import (
    EtcdJsonError,
    kv_from_json,
    request_from_json,
    request_to_json,
    response_from_json,
    response_to_json,
)
from etcdspec.checker.history import (
    HistoryError,
    build_history,
    parse_event,
    parse_history_text,
    write_history,
)
from etcdspec.checker.simulate import simulate_etcd
from etcdspec.model.requests import DeleteRangeRequest, KeyValue, PutRequest, RangeRequest

# (f, JSON request, the request the careful path must make of it)
REQUESTS: list[tuple[str, dict[str, Any], object]] = [
    (
        "range",
        {
            "key": "a",
            "range_end": "b",
            "limit": 2,
            "revision": 0,
            "keys_only": True,
            "count_only": False,
        },
        RangeRequest(b"a", b"b", 2, 0, True, False),
    ),
    ("range", {"key": "a"}, RangeRequest(b"a")),  # missing fields are zero values
    ("range", {"key": "a", "limit": "3"}, RangeRequest(b"a", limit=3)),  # decimal string
    ("range", {"key": {"b64": "AAE="}, "range_end": ""}, RangeRequest(b"\x00\x01")),
    ("range", {"key": "a", "keys_only": None}, RangeRequest(b"a")),
    (
        "put",
        {
            "key": "k",
            "value": "v",
            "lease": 7,
            "prev_kv": True,
            "ignore_value": False,
            "ignore_lease": False,
        },
        PutRequest(b"k", b"v", 7, True),
    ),
    ("put", {"key": "k", "value": "v", "lease": None}, PutRequest(b"k", b"v")),
    ("delete", {"key": "k", "range_end": "", "prev_kv": True}, DeleteRangeRequest(b"k", b"", True)),
    ("delete", {"key": "k", "range_end": "\u00e9"}, DeleteRangeRequest(b"k", "\u00e9".encode())),
]


@pytest.mark.parametrize(("f", "value", "expected"), REQUESTS)
def test_request_decodes_alike_on_both_paths(
    f: str, value: dict[str, Any], expected: object
) -> None:
    assert request_from_json(f, value) == expected
    assert request_from_json(f, dict(value)) == expected  # the shared (cached) one too


# A value that is equal to a plain one but of another JSON type must not take its place.
LOOKALIKES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "range",
        {
            "key": "a",
            "range_end": "",
            "limit": 1,
            "revision": 0,
            "keys_only": False,
            "count_only": False,
        },
        {
            "key": "a",
            "range_end": "",
            "limit": True,
            "revision": 0,
            "keys_only": False,
            "count_only": False,
        },
    ),
    (
        "range",
        {
            "key": "a",
            "range_end": "",
            "limit": 0,
            "revision": 0,
            "keys_only": False,
            "count_only": False,
        },
        {
            "key": "a",
            "range_end": "",
            "limit": 0,
            "revision": 0,
            "keys_only": 0,
            "count_only": False,
        },
    ),
]


@pytest.mark.parametrize(("f", "plain", "lookalike"), LOOKALIKES)
def test_shared_message_never_stands_for_a_value_of_another_type(
    f: str, plain: dict[str, Any], lookalike: dict[str, Any]
) -> None:
    request_from_json(f, plain)  # now shared
    with pytest.raises(EtcdJsonError):
        request_from_json(f, lookalike)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            {
                "key": "k",
                "create_revision": 2,
                "mod_revision": 3,
                "version": 2,
                "value": "v",
                "lease": 0,
            },
            KeyValue(b"k", 2, 3, 2, b"v"),
        ),
        ({"key": "k", "mod_revision": "3", "version": 1}, KeyValue(b"k", 0, 3, 1)),
        ({"key": "k", "value": {"b64": "/w=="}, "version": 1}, KeyValue(b"k", 0, 0, 1, b"\xff")),
    ],
)
def test_kv_decodes_alike_on_both_paths(value: dict[str, Any], expected: KeyValue) -> None:
    assert kv_from_json(value, "kv") == expected


@pytest.mark.parametrize(
    ("f", "value", "where"),
    [
        ("range", {"key": 1}, "value.key"),
        ("range", {"key": "a", "limit": True}, "value.limit"),
        ("put", {"key": "a", "value": 3}, "value.value"),
        ("delete", {"key": "a", "prev_kv": "yes"}, "value.prev_kv"),
    ],
)
def test_bad_field_is_named_whichever_path(f: str, value: dict[str, Any], where: str) -> None:
    with pytest.raises(EtcdJsonError, match=f"^{where}:"):
        request_from_json(f, value)


def test_shared_cache_starts_again_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(etcd_json, "_SHARED_MAX", 4)
    plain = etcd_json._PLAIN_KV
    assert plain.cache is not None
    plain.cache.clear()
    for version in range(1, 11):
        item = {
            "key": "k",
            "create_revision": 2,
            "mod_revision": 2 + version,
            "version": version,
            "value": "v",
            "lease": 0,
        }
        assert kv_from_json(item, "kv").version == version
        assert len(plain.cache) <= 4


def test_simulated_history_round_trips_through_the_decoders() -> None:
    """Every request and response of a simulated etcd history (with leases) decodes to
    what encodes back to the same JSON."""
    history = build_history(simulate_etcd(3, ops=400, processes=5, info_rate=0.1, leases=True))
    for op in history.operations:
        request = request_from_json(op.f, op.request)
        assert request_to_json(request) == (op.f, op.request)
        if op.type == "ok":
            response = response_from_json(op.f, op.response)
            assert response_to_json(response) == op.response


# -- the history reader --------------------------------------------------------------
LINE = {"index": 0, "process": 1, "type": "invoke", "f": "put", "value": {"key": "a"}, "time": 5}


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (json.dumps(LINE) + "   ", 1),  # trailing blanks
        ("  " + json.dumps(LINE), 1),  # leading blanks
        (json.dumps({**LINE, "schema_version": 1}), 1),  # the schema walk
        ("\n\n" + json.dumps(LINE) + "\n\n", 3),  # blank lines
    ],
)
def test_odd_but_valid_lines_read_like_plain_ones(text: str, line: int) -> None:
    history = parse_history_text(text)
    (event,) = history.events
    assert (event.index, event.process, event.f, event.value, event.time, event.line) == (
        0,
        1,
        "put",
        {"key": "a"},
        5,
        line,
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"index": 0} {"index": 1}', "not valid JSON"),
        (json.dumps({**LINE, "index": -1}), "index"),
        (json.dumps({**LINE, "f": ""}), "must not be empty"),
        (json.dumps({**LINE, "extra": 1}), 'unknown field "extra"'),
        (json.dumps({**LINE, "schema_version": 99}), "newer than this checker"),
        (json.dumps({**LINE, "process": 1.5}), "process"),
    ],
)
def test_lines_that_are_not_plainly_valid_get_the_schema_error(line: str, message: str) -> None:
    with pytest.raises(HistoryError, match=message):
        parse_history_text(line, source="h.jsonl")


def test_fast_reader_gives_the_events_parse_event_gives(tmp_path: Any) -> None:
    events = simulate_etcd(5, ops=300, processes=4, info_rate=0.1, watch=True)
    path = tmp_path / "h.jsonl"
    write_history(events, path)
    text = path.read_text()
    fast = parse_history_text(text).events
    careful = [
        parse_event(json.loads(raw), "<memory>", number)
        for number, raw in enumerate(text.splitlines(), start=1)
    ]
    assert [e.__dict__ for e in fast] == [e.__dict__ for e in careful]


@pytest.mark.parametrize(
    ("value", "revision"),
    [
        ({"header": {"revision": 4}}, 4),  # plain
        ({"header": {"revision": 4, "member_id": 9, "raft_term": 2}}, 4),  # others ignored
        ({"header": {"revision": "4"}}, 4),  # decimal string: the careful path
        ({"header": {}}, 0),
        ({"header": None}, 0),
        ({}, 0),
    ],
)
def test_response_header_decodes_alike_on_both_paths(value: dict[str, Any], revision: int) -> None:
    assert response_from_json("compact", value).header.revision == revision
    assert response_from_json("range", value).header.revision == revision  # in a range too


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"header": {"revision": True}}, r"value\.header\.revision:"),
        ({"header": 3}, r"value\.header:"),
        (
            {"header": {"revision": 1}, "responses": [{"response_put": {"header": []}}]},
            r"value\.responses\[0\]\.response_put\.header:",
        ),
    ],
)
def test_bad_header_is_named_whichever_path(value: dict[str, Any], where: str) -> None:
    with pytest.raises(EtcdJsonError, match=f"^{where}"):
        response_from_json("txn", value)


@pytest.mark.parametrize(
    ("f", "value", "where"),
    [
        ("txn", {"success": [{"request_put": {"key": "a", "value": 3}}]}, "value.success[0]"),
        (
            "txn",
            {"failure": [{"request_range": {"key": "a"}}, {"request_range": {"limit": "x"}}]},
            "value.failure[1].request_range.limit",
        ),
        (
            "txn",
            {"success": [{"request_txn": {"success": [{"request_put": {"key": 5}}]}}]},
            "value.success[0].request_txn.success[0].request_put.key",
        ),
        ("txn", {"success": [{"request_nothing": {}}]}, "value.success[0]"),
        ("txn", {"success": [{"request_put": {}, "request_range": {}}]}, "value.success[0]"),
        ("txn", {"success": [7]}, "value.success[0]"),
    ],
)
def test_bad_txn_op_is_named_at_its_path(f: str, value: dict[str, Any], where: str) -> None:
    """A txn's ops are read without their path written out (`_decoded`): a bad one is
    read again at its path, so the error names it as the field-by-field reader did."""
    with pytest.raises(EtcdJsonError, match=f"^{re.escape(where)}"):
        request_from_json(f, value)
