"""bench/porcupine_compare.py: the exported histories are the histories' operations, our
side gives the planted verdicts, Jepsen logs read as porcupine's tests read them, and a
disagreement is only one where both checkers decided. With Go and porcupine's source
present (PORCUPINE_SRC), porcupine agrees with us on small histories, a non-linearizable
one and the info and absent-key corners of the models among them; without them that one
test is skipped (the benchmark itself says how to get them)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from bench.porcupine_compare import (
    HistorySet,
    NamedHistory,
    Outcome,
    Porcupine,
    Row,
    find_porcupine,
    generate,
    read_export,
    read_jepsen_log,
    run_set,
    summarize,
    table,
    write_export,
)
from etcdspec.checker.history import HistoryBuilder, build_history

TINY = [
    HistorySet("register", "register", 3, (60, 80), 5, 0.2, bad_every=3),
    HistorySet("kv", "kv", 2, (80, 80), 4, 0.2, keys=3, bad_every=2),
]


def _tiny() -> list[NamedHistory]:
    return [item for hset in TINY for item in generate(hset)]


def test_the_export_round_trips_every_operation_of_every_history(tmp_path: Path) -> None:
    histories = _tiny()
    assert any(op.type == "info" for h in histories for op in h.history.operations)
    path = tmp_path / "histories.json"
    write_export(histories, path)
    back = read_export(path)
    assert [(name, model) for name, model, _ in back] == [(h.name, h.model) for h in histories]
    for (_, _, operations), item in zip(back, histories, strict=True):
        assert [asdict(op) for op in operations] == [asdict(op) for op in item.history.operations]


def test_an_export_of_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"format": "something-else", "version": 1, "histories": []}')
    with pytest.raises(ValueError, match="etcdspec-porcupine-histories"):
        read_export(path)


def test_our_side_decides_each_history_as_planted_and_the_table_marks_no_porcupine() -> None:
    histories = _tiny()
    assert [h.planted is not None for h in histories] == [False, False, True, False, True]
    rows = run_set(histories, Porcupine(None, "no go"), 30.0, 1, None, lambda _: None)
    assert [r.ours.verdict for r in rows] == ["false" if h.planted else "true" for h in histories]
    summary = summarize("tiny", rows)
    assert summary.ours_decided == len(rows)
    assert summary.theirs_decided is None and summary.ratio is None
    assert "| tiny | 5 |" in table([summary])
    assert summary.disagreements == ()


@pytest.mark.parametrize(
    ("ours", "theirs", "disagree"),
    [
        ("true", "false", True),
        ("false", "true", True),
        ("true", "true", False),
        ("unknown", "false", False),  # a timeout is never a decided verdict
        ("false", "unknown", False),
    ],
)
def test_a_disagreement_needs_both_checkers_to_have_decided(
    ours: str, theirs: str, disagree: bool
) -> None:
    row = Row("h", 1, None, Outcome(ours, 0.1, 0.1), Outcome(theirs, 0.1, 0.1))
    assert row.disagrees is disagree
    assert len(summarize("s", [row]).disagreements) == int(disagree)


JEPSEN_LOG = """\
INFO  jepsen.util - 0\t:invoke\t:write\t1
INFO  jepsen.util - 1\t:invoke\t:cas\t[1 2]
INFO  jepsen.util - 0\t:ok\t:write\t1
INFO  jepsen.util - 1\t:info\t:cas\t:timed-out
INFO  jepsen.util - 2\t:invoke\t:read\tnil
INFO  jepsen.util - 2\t:ok\t:read\t2
INFO  jepsen.util - 0\t:invoke\t:cas\t[2 3]
INFO  jepsen.util - 0\t:fail\t:cas\t[2 3]
INFO  jepsen.util - 3\t:invoke\t:write\t4
"""


def test_a_jepsen_log_reads_as_porcupines_tests_read_it(tmp_path: Path) -> None:
    path = tmp_path / "etcd_000.log"
    path.write_text(JEPSEN_LOG + "some other line\n")
    history = build_history(read_jepsen_log(path))
    described = [(op.process, op.f, op.type, op.request, op.response) for op in history.operations]
    assert described == [
        (0, "write", "ok", 1, 1),
        (1, "cas", "info", [1, 2], [1, 2]),  # :timed-out: the invoke's value
        (2, "read", "ok", None, 2),
        (0, "cas", "fail", [2, 3], [2, 3]),
        (3, "write", "info", 4, None),  # never completed
    ]


def _hand_made() -> list[NamedHistory]:
    """Corners of the models: an info cas that cannot apply, a get of an absent key, an
    append to one, a read of a value only an info write wrote, and a stale read."""

    def history(name: str, model: str, events: list[tuple[int, str, str, object]]) -> NamedHistory:
        builder = HistoryBuilder()
        for process, type_, f, value in events:
            builder.add(process, type_, f, value)
        return NamedHistory(name, model, build_history(builder.events, name), None)

    absent = {"key": "a", "value": None}
    return [
        history(
            "hand/info-cas-never-applies",
            "register",
            [
                (0, "invoke", "cas", [7, 8]),
                (0, "info", "cas", [7, 8]),
                (1, "invoke", "read", None),
                (1, "ok", "read", None),
            ],
        ),
        history(
            "hand/read-of-an-info-write",
            "register",
            [
                (0, "invoke", "write", 3),
                (0, "info", "write", 3),
                (1, "invoke", "read", None),
                (1, "ok", "read", 3),
                (1, "invoke", "read", None),
                (1, "ok", "read", None),
            ],
        ),
        history(
            "hand/stale-read",
            "register",
            [
                (0, "invoke", "write", 1),
                (0, "ok", "write", 1),
                (0, "invoke", "write", 2),
                (0, "ok", "write", 2),
                (1, "invoke", "read", None),
                (1, "ok", "read", 1),
            ],
        ),
        history(
            "hand/append-to-absent",
            "kv",
            [
                (0, "invoke", "get", {"key": "a"}),
                (0, "ok", "get", absent),
                (0, "invoke", "append", {"key": "a", "value": "x"}),
                (0, "ok", "append", {"key": "a", "value": "x"}),
                (1, "invoke", "get", {"key": "a"}),
                (1, "ok", "get", {"key": "a", "value": "x"}),
            ],
        ),
        history(
            "hand/absent-after-put",
            "kv",
            [
                (0, "invoke", "put", {"key": "a", "value": ""}),
                (0, "ok", "put", {"key": "a", "value": ""}),
                (1, "invoke", "get", {"key": "a"}),
                (1, "ok", "get", absent),
            ],
        ),
    ]


def test_porcupine_agrees_with_us_on_small_histories_and_model_corners() -> None:
    porcupine = find_porcupine()
    if porcupine.binary is None:
        pytest.skip(f"porcupine harness not available: {porcupine.missing}")
    histories = _tiny() + _hand_made()
    rows = run_set(histories, porcupine, 30.0, 1, None, lambda _: None)
    verdicts = {r.name: (r.ours.verdict, r.theirs.verdict if r.theirs else None) for r in rows}
    assert verdicts["hand/info-cas-never-applies"] == ("true", "true")
    assert verdicts["hand/read-of-an-info-write"] == ("false", "false")
    assert verdicts["hand/stale-read"] == ("false", "false")
    assert verdicts["hand/append-to-absent"] == ("true", "true")
    assert verdicts["hand/absent-after-put"] == ("false", "false")
    assert all(ours == theirs for ours, theirs in verdicts.values()), verdicts
    assert any(ours == "false" for ours, _ in verdicts.values())


def test_the_report_is_timed_apart_and_added_in_its_own_ratio() -> None:
    # Our check is timed for its verdict; describe() and to_json() after it (the failure
    # of a refuted history worked out there) in their own figure, "with the report".
    rows = run_set(_tiny(), Porcupine(None, "no go"), 30.0, 1, None, lambda _: None)
    assert all(r.ours.report_cpu_seconds >= 0 for r in rows)
    summary = summarize("tiny", rows)
    assert summary.report_cpu_s == sum(r.ours.report_cpu_seconds for r in rows)
    assert summary.report_cpu_ratio is None  # no porcupine: no ratio
    ours = Outcome("false", 0.1, 0.3, report_cpu_seconds=0.1)
    decided = [Row("a", 1, None, ours, Outcome("false", 0.2, 0.2))]
    timed = summarize("s", decided)
    assert timed.cpu_ratio == pytest.approx(1.5) and timed.report_cpu_ratio == pytest.approx(2.0)
    assert "2.00x |" in table([timed])
