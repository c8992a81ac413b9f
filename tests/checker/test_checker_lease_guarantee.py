"""The lease guarantee check (checker/lease_checks.py) on small hand-made histories in the
form the `lease-guarantee` workload records: a key seen gone after its lease's
acknowledged deadline holds; gone before it is a violation (also when the ack came after
the key was seen gone); a client revoke, a second writer or no read before a deadline
leaves nothing judged (unknown, never a pass); check_history adds the check.
"""

from __future__ import annotations

from typing import Any

from etcdspec.checker.check import CheckOptions, check_history
from etcdspec.checker.history import HistoryEvent, build_history
from etcdspec.checker.lease_checks import CHECK_NAME, check_lease_guarantee
from etcdspec.verdict import Verdict

S = 1_000_000_000
KEY = "lease-held/w1-1"
LEASE = 77


class Script:
    """A history built one operation at a time, each on its own process, at given times."""

    def __init__(self) -> None:
        self.events: list[HistoryEvent] = []
        self.process = 0

    def op(self, f: str, request: Any, at: float, kind: str, response: Any) -> None:
        self.process += 1
        call, ret = int(at * S), int(at * S) + S // 100
        for type_, value, when in (("invoke", request, call), (kind, response, ret)):
            index = len(self.events)
            self.events.append(HistoryEvent(index, self.process, type_, f, value, when))

    def grant(self, at: float, ttl: int = 2) -> None:
        header = {"revision": 1}
        self.op("lease_grant", {"TTL": ttl}, at, "ok", {"header": header, "ID": LEASE, "TTL": ttl})

    def put(self, at: float, key: str = KEY) -> None:
        self.op(
            "put", {"key": key, "value": "v", "lease": LEASE}, at, "ok", {"header": {"revision": 2}}
        )

    def keepalive(self, at: float, ttl: int = 2) -> None:
        # as conform/recorder.py records an answered keep-alive: info, "answered": true
        answer = {"header": {}, "ID": LEASE, "TTL": ttl, "answered": True}
        self.op("lease_keepalive", {"ID": LEASE}, at, "info", answer)

    def read(self, at: float, present: bool) -> None:
        kvs = [{"key": KEY, "value": "v", "lease": LEASE}] if present else []
        response = {"header": {"revision": 2}, "kvs": kvs, "count": len(kvs)}
        self.op("range", {"key": KEY}, at, "ok", response)

    def check(self, tolerance_s: float = 0.5) -> Any:
        return check_lease_guarantee(build_history(self.events), tolerance_s)


def _kept_alive() -> Script:
    script = Script()
    script.grant(0.0)
    script.put(0.1)
    script.keepalive(1.0)
    script.read(1.5, present=True)
    return script


def test_key_gone_after_the_deadline_holds() -> None:
    script = _kept_alive()
    script.read(2.7, present=False)  # deadline 1.0 + 2 - 0.5 = 2.5: gone after it
    result = script.check()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert "found every key still there" in result.summary


def test_key_gone_before_the_acknowledged_deadline_is_a_violation() -> None:
    script = _kept_alive()
    script.read(2.0, present=False)  # the keep-alive at 1.0 promised until 2.5
    result = script.check()
    assert result.verdict is Verdict.FALSE, result.describe()
    (detail,) = result.details
    assert f"key {KEY} (lease {LEASE}" in detail
    assert "lease_keepalive of lease 77 ttl 2" in detail
    assert "0.490 s before the deadline" in detail
    assert result.events


def test_an_ack_after_the_key_was_seen_gone_is_a_violation() -> None:
    script = Script()
    script.grant(0.0)
    script.put(0.1)
    script.read(2.2, present=False)  # expired after the grant's deadline: fine so far
    script.keepalive(2.3)  # a keep-alive acknowledged for a lease already gone
    result = script.check()
    assert result.verdict is Verdict.FALSE, result.describe()


def test_the_tolerance_absorbs_a_leader_change() -> None:
    script = _kept_alive()
    script.read(2.0, present=False)
    assert script.check(tolerance_s=1.1).verdict is Verdict.TRUE  # deadline 1.9


def test_a_client_revoke_or_a_second_writer_leaves_nothing_judged() -> None:
    script = _kept_alive()
    script.op("lease_revoke", {"ID": LEASE}, 1.8, "ok", {"header": {}})
    script.read(2.0, present=False)
    revoked = script.check()
    assert revoked.verdict is Verdict.TRUE  # the read at 1.5 was judged, not the one at 2.0
    script = Script()
    script.grant(0.0)
    script.put(0.1)
    script.keepalive(1.0)
    script.put(1.2)  # the same key written again: not a held key any more
    script.read(2.0, present=False)
    result = script.check()
    assert result.verdict is Verdict.UNKNOWN, result.describe()
    assert "nothing could show a violation" in result.summary


def test_check_history_adds_the_lease_guarantee_to_a_held_key_history() -> None:
    script = _kept_alive()
    script.read(2.0, present=False)
    report = check_history(build_history(script.events), CheckOptions(lease_tolerance_s=0.5))
    names = {r.name: r.verdict for r in report.results}
    assert names[CHECK_NAME] is Verdict.FALSE
    assert report.verdict is Verdict.FALSE
