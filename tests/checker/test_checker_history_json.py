"""The history reader's two JSON paths (orjson, the stdlib) read every text alike: the
same events, or the same error on the same line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from etcdspec.checker import history as history_module
from etcdspec.checker.history import (
    History,
    HistoryError,
    long_digit_run,
    parse_history_text,
    read_history,
)
from etcdspec.checker.simulate import simulate_etcd

INVOKE = '{"index":0,"process":0,"type":"invoke","f":"put","value":%s,"time":1}'
OK = '{"index":1,"process":0,"type":"ok","f":"put","value":%s,"time":2}'
PLAIN = '{"key":"k","value":"v","lease":0}'

TEXTS = {
    "plain": "\n".join([INVOKE % PLAIN, OK % '{"header":{"revision":2}}']),
    "blank lines and spaces": "\n  \n".join([" " + INVOKE % PLAIN, OK % "null" + "  "]),
    "big integer (19 digits)": "\n".join([INVOKE % '{"lease":-9999999999999999999}', OK % "1"]),
    "big integer (30 digits)": "\n".join(
        [INVOKE % '{"lease":123456789012345678901234567890}', OK % "1"]
    ),
    "18-digit integers": "\n".join([INVOKE % '{"lease":-999999999999999999}', OK % "1"]),
    "nan": "\n".join([INVOKE % '{"x":NaN}', OK % "1"]),
    "float out of range": "\n".join([INVOKE % '{"x":1e400}', OK % "1"]),
    "escaped lone surrogate": "\n".join([INVOKE % '{"key":"\\ud800"}', OK % "1"]),
    "duplicate field": "\n".join([INVOKE % '{"key":"a","key":"b"}', OK % "1"]),
    "trailing text": "\n".join([INVOKE % PLAIN + " x", OK % "1"]),
    "not json": "\n".join([INVOKE % PLAIN, "{nope"]),
    "bad field type": '{"index":"0","process":0,"type":"invoke","f":"put","time":1}',
}


def read(text: str, fast: bool, monkeypatch: pytest.MonkeyPatch) -> History | str:
    monkeypatch.setattr(history_module, "_FAST_JSON", fast)
    try:
        return parse_history_text(text, "h.jsonl")
    except HistoryError as error:
        return f"error: {error}"


def canonical(read_as: History | str) -> str:
    """Every field of every event and operation, types included (repr tells 1 from 1.0
    and True, and shows nan), or the error."""
    if isinstance(read_as, str):
        return read_as
    parts = [*read_as.events, *read_as.operations, *read_as.watch_events]
    return repr([dataclasses.astuple(part) for part in parts] + [read_as.source, read_as.notes])


def test_stdlib_path_is_taken_when_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(raw: str) -> object:
        raise AssertionError(f"orjson asked to decode {raw!r} while switched off")

    monkeypatch.setattr(history_module, "_orjson_loads", refuse)
    assert isinstance(read(TEXTS["plain"], False, monkeypatch), History)


@pytest.mark.parametrize(
    ("name", "usable"),
    [
        ("plain", True),
        ("18-digit integers", True),
        ("big integer (19 digits)", False),
        ("big integer (30 digits)", False),
    ],
)
def test_long_digit_runs_keep_the_stdlib(name: str, usable: bool) -> None:
    assert long_digit_run(TEXTS[name]) is not usable


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_both_paths_read_alike(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = TEXTS[name]
    assert canonical(read(text, True, monkeypatch)) == canonical(read(text, False, monkeypatch))


def test_stdlib_path_keeps_big_integers_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    got = read(TEXTS["big integer (19 digits)"], True, monkeypatch)
    assert isinstance(got, History)
    assert got.events[0].value == {"lease": -9999999999999999999}


def test_both_paths_read_a_simulated_history_alike(
    tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from etcdspec.checker.history import write_history

    path = tmp_path / "h.jsonl"  # type: ignore[operator]
    write_history(simulate_etcd(3, ops=300, processes=4, info_rate=0.1), path)
    text = path.read_text(encoding="utf-8")
    fast = read(text, True, monkeypatch)
    slow = read(text, False, monkeypatch)
    assert isinstance(fast, History)
    assert canonical(fast) == canonical(slow)
    assert len(fast.operations) == 300


def test_only_lines_with_long_digit_runs_leave_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[str] = []
    orjson_loads = history_module._orjson_loads
    assert orjson_loads is not None, "orjson is a dependency of etcdspec"

    def counting(raw: str) -> object:
        decoded.append(raw)
        return orjson_loads(raw)

    monkeypatch.setattr(history_module, "_orjson_loads", counting)
    big = INVOKE % '{"key":"k","value":"v","lease":7587869185929184775}'
    text = "\n".join([big, OK % '{"header":{"revision":2}}'])
    got = read(text, True, monkeypatch)
    assert isinstance(got, History)
    assert got.events[0].value["lease"] == 7587869185929184775
    assert decoded == [OK % '{"header":{"revision":2}}']


FILES = {
    **{name: text.encode() for name, text in TEXTS.items()},
    "crlf line ends": (INVOKE % PLAIN + "\r\n" + OK % "null" + "\r\n").encode(),
    "lone cr line ends": (INVOKE % PLAIN + "\r" + OK % "null" + "\r").encode(),
    "a vertical tab splits a str line": (INVOKE % PLAIN + "\x0b" + OK % "null").encode(),
    "a form feed between lines": (INVOKE % PLAIN + "\n\x0c\n" + OK % "null").encode(),
    "a group separator in a value": (INVOKE % '{"key":"a\x1db"}' + "\n" + OK % "1").encode(),
    "a unit separator line (str whitespace)": (INVOKE % PLAIN + "\n\x1f\n" + OK % "1").encode(),
    "non-ASCII value": (INVOKE % '{"key":"\u00e9\u2028"}' + "\n" + OK % "1").encode(),
    "not UTF-8": (INVOKE % '{"key":"a"}').encode() + b"\xff\n",
    "a long digit run": (INVOKE % '{"lease":7587869185929184775}' + "\n" + OK % "1").encode(),
    "EDN": b"{:type :invoke, :f :read, :process 0}\n{:type :ok, :f :read, :process 0}\n",
}


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("fast", [True, False])
def test_a_file_reads_as_its_text_did(
    name: str, fast: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """read_history reads ASCII files as bytes (`_STR_ONLY_BREAKS` aside): every file
    gives what reading it as text (universal newlines) and parsing that text gave,
    events, operations and errors alike."""
    monkeypatch.setattr(history_module, "_FAST_JSON", fast)
    path = tmp_path / "h.jsonl"
    path.write_bytes(FILES[name])

    def as_text() -> History | str:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            return f"error: {path}: not UTF-8 text ({error.reason})"
        try:
            return parse_history_text(text, str(path))
        except HistoryError as error:
            return f"error: {error}"

    try:
        got: History | str = read_history(path)
    except HistoryError as error:
        got = f"error: {error}"
    assert canonical(got) == canonical(as_text())
