"""Watch guarantees on histories generated from the store model: a correct stream holds
every guarantee; each injected fault breaks the guarantee it targets (and only the
watch checks: the KV history stays linearizable)."""

from __future__ import annotations

import pytest

from etcdspec.checker.check import CheckOptions, check_history
from etcdspec.checker.history import build_history, parse_history_text
from etcdspec.checker.simulate import WATCH_FAULTS, simulate_etcd
from etcdspec.checker.watch_checks import parse_watches
from etcdspec.verdict import Verdict


@pytest.mark.parametrize("seed", range(3))
def test_correct_watch_stream_holds_every_guarantee(seed: int) -> None:
    history = build_history(simulate_etcd(seed, ops=200, processes=4, watch=True))
    report = check_history(history, CheckOptions(model="etcd"))
    assert report.verdict is Verdict.TRUE, report.describe()
    assert len(report.results) == 11  # Linearizable + the ten watch checks


@pytest.mark.parametrize(("fault", "guarantee"), sorted(WATCH_FAULTS.items()))
@pytest.mark.parametrize("seed", range(2))
def test_watch_fault_breaks_its_guarantee(fault: str, guarantee: str, seed: int) -> None:
    history = build_history(simulate_etcd(seed, ops=200, processes=4, watch_fault=fault))
    report = check_history(history, CheckOptions(model="etcd"))
    verdicts = {r.name: r.verdict for r in report.results}
    assert verdicts["Linearizable"] is Verdict.TRUE
    assert verdicts[guarantee] is Verdict.FALSE, report.describe()
    broken = next(r for r in report.results if r.name == guarantee)
    assert broken.events, "the failing watch events are pointed at"


def test_watch_checks_are_unknown_without_a_linearization() -> None:
    history = build_history(simulate_etcd(1, ops=200, fault="stale_read", watch=True))
    report = check_history(history, CheckOptions(model="etcd"))
    verdicts = {r.name: r.verdict for r in report.results}
    assert verdicts["Linearizable"] is Verdict.FALSE
    assert verdicts["Reliable"] is Verdict.UNKNOWN


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"watch":"w","header":{"revision":2}}', "before its watch_create"),
        ('{"nothing":1}', '"watch": name'),
    ],
)
def test_malformed_watch_events_are_bad_input(line: str, needle: str) -> None:
    text = (
        f'{{"index":0,"process":"w","type":"watch","f":"watch_response","value":{line},"time":1}}'
    )
    history = parse_history_text(text)
    with pytest.raises(ValueError, match=needle):
        parse_watches(history)
