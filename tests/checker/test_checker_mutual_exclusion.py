"""The mutual-exclusion check of lock histories (checker/mutual_exclusion.py), on small
hand-made histories in the form the `locks` workload records: each rule of the module's
docstring holds on a correct history and fails on the violation it names; guarded
writes that failed and info writes are no evidence; a history with one holder per lock
is unknown; check_history judges a lock history by this check alone.
"""

from __future__ import annotations

from typing import Any

from etcdspec.checker.check import check_history
from etcdspec.checker.history import HistoryEvent, build_history
from etcdspec.checker.mutual_exclusion import check_mutual_exclusion, fenced_writes
from etcdspec.verdict import Verdict


class Script:
    """A history built one operation at a time (each on its own process)."""

    def __init__(self) -> None:
        self.events: list[HistoryEvent] = []
        self.process = 0

    def op(self, f: str, request: Any, kind: str, response: Any) -> None:
        self.process += 1
        for type_, value in (("invoke", request), (kind, response)):
            index = len(self.events)
            self.events.append(HistoryEvent(index, self.process, type_, f, value, index * 10))

    def lock(self, name: str, key: str, revision: int) -> None:
        self.op(
            "lock",
            {"name": name, "lease": int(key.rpartition("/")[2], 16)},
            "ok",
            {"header": {"revision": revision}, "key": key},
        )

    def fenced(
        self,
        name: str,
        key: str,
        revision: int,
        queue: list[tuple[str, int]],
        succeeded: bool = True,
        kind: str = "ok",
    ) -> None:
        request = {
            "compare": [
                {"key": key, "range_end": "", "target": "CREATE", "result": "GREATER"}
                | {"create_revision": 0}
            ],
            "success": [
                {"request_put": {"key": f"fence/{name}", "value": f"v{revision}"}},
                {"request_range": {"key": f"{name}/", "range_end": f"{name}0"}},
            ],
            "failure": [{"request_range": {"key": key}}],
        }
        kvs = [{"key": k, "create_revision": c, "mod_revision": c, "version": 1} for k, c in queue]
        responses = [
            {"response_put": {"header": {"revision": revision}}},
            {"response_range": {"header": {"revision": revision}, "kvs": kvs, "count": len(kvs)}},
        ]
        response: Any = {
            "header": {"revision": revision},
            "succeeded": succeeded,
            "responses": responses if succeeded else [{"response_range": {"kvs": []}}],
        }
        if kind == "info":
            response = {"error": "deadline exceeded", "code": "DEADLINE_EXCEEDED"}
        self.op("txn", request, kind, response)

    def check(self) -> Any:
        return check_mutual_exclusion(build_history(self.events))


def sequential() -> Script:
    """a holds (enter, exit), unlocks; b, queued behind it, then holds."""
    s = Script()
    s.lock("m", "m/a", 2)
    s.fenced("m", "m/a", 4, [("m/a", 2), ("m/b", 3)])
    s.fenced("m", "m/a", 5, [("m/a", 2), ("m/b", 3)])
    s.lock("m", "m/b", 6)
    s.fenced("m", "m/b", 7, [("m/b", 3)])
    s.fenced("m", "m/b", 8, [("m/b", 3)])
    return s


def test_holders_one_after_the_other_hold() -> None:
    result = sequential().check()
    assert result.verdict is Verdict.TRUE, result.details
    assert result.summary.startswith("4 fenced writes by 2 holders of 1 locks")


def test_a_write_while_a_key_is_ahead_in_the_queue_is_a_violation() -> None:
    s = Script()
    s.lock("m", "m/a", 2)
    s.lock("m", "m/b", 3)  # granted without waiting for m/a
    s.fenced("m", "m/b", 4, [("m/a", 2), ("m/b", 3)])
    s.fenced("m", "m/a", 5, [("m/a", 2), ("m/b", 3)])
    result = s.check()
    assert result.verdict is Verdict.FALSE
    assert any("m/a (create revision 2) was ahead of it" in d for d in result.details)


def test_overlapping_tenures_are_two_holders_at_once_even_with_a_plausible_queue() -> None:
    """Rule 2 alone: each write's queue shows its writer first (as a server lying about
    the queue would), but b wrote inside a's tenure."""
    s = Script()
    s.fenced("m", "m/a", 4, [("m/a", 2)])
    s.fenced("m", "m/b", 5, [("m/b", 3)])
    s.fenced("m", "m/a", 6, [("m/a", 2)])
    result = s.check()
    assert result.verdict is Verdict.FALSE
    assert any("two holders at once: m/a held from revision 4 to 6" in d for d in result.details)


def test_tenures_out_of_queue_order_are_a_violation() -> None:
    s = Script()
    s.fenced("m", "m/b", 4, [("m/b", 3)])
    s.fenced("m", "m/a", 6, [("m/a", 2)])
    result = s.check()
    assert result.verdict is Verdict.FALSE
    assert any("out of queue order" in d for d in result.details)


def test_a_holder_that_lost_its_lease_wrote_nothing_after() -> None:
    """a's lease expired (its key gone at 6): its late write's guard failed; b holds."""
    s = Script()
    s.fenced("m", "m/a", 4, [("m/a", 2), ("m/b", 3)])
    s.fenced("m", "m/b", 7, [("m/b", 3)])
    s.fenced("m", "m/a", 8, [], succeeded=False)
    s.fenced("m", "m/b", 9, [("m/b", 3)])
    result = s.check()
    assert result.verdict is Verdict.TRUE
    assert "3 fenced writes by 2 holders of 1 locks (1 refused: the holder's key was gone)" in (
        result.summary
    )


def test_info_writes_are_no_evidence() -> None:
    s = sequential()
    s.fenced("m", "m/a", 0, [], kind="info")
    assert len(fenced_writes(build_history(s.events))) == 4
    assert s.check().verdict is Verdict.TRUE


def test_one_holder_per_lock_is_unknown_not_a_pass() -> None:
    s = Script()
    s.fenced("m", "m/a", 4, [("m/a", 2)])
    s.fenced("n", "n/b", 5, [("n/b", 3)])
    result = s.check()
    assert result.verdict is Verdict.UNKNOWN
    assert "nothing was judged" in result.summary


def test_check_history_judges_a_lock_history_by_mutual_exclusion_alone() -> None:
    report = check_history(build_history(sequential().events))
    assert [r.name for r in report.results] == ["MutualExclusion"]
    assert report.verdict is Verdict.TRUE and report.linearizability is None
    assert any("only mutual exclusion is checked" in note for note in report.notes)
