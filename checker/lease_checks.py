"""The lease guarantee, judged from a recorded history's keep-alive responses and reads.

etcd's promise: a lease whose keep-alive (or grant) was acknowledged with TTL t is not
expired before t has passed on the leader's clock, give or take the election timeout
after a leader change (a new leader extends every lease by the election timeout, as
clients may still renew at the old leader until it steps down, at most an election
timeout later). So no key attached to the lease is deleted by expiry before

    deadline = the acknowledging call's invoke time + t - tolerance

(the server renewed the lease at some moment after the call was invoked, so its own
deadline is no earlier than invoke + t; `tolerance` is the election timeout plus slack
for the recorder's scheduling).

What is judged: a "held" key (its name starts with HELD_PREFIX, the `lease-guarantee`
workload's) written by exactly one put in the whole history, which succeeded with a
lease L, and touched by no other write (delete, txn). A linearizable read of that key
that was invoked after the put returned and that found the key gone, returning at time
g, shows that L's keys were deleted before g. Unless a client revoke of L was invoked
before g (a client may delete a lease's keys at any time), each ok acknowledgement of L
with TTL t > 0 (lease_keepalive, or the lease_grant) whose deadline is after g is a
violation: the key was gone before the deadline. This also catches an acknowledgement
given after the key was already seen gone (its deadline is later still). A keep-alive
answer is recorded as `info` with `"answered": true` and the response (conform/
recorder.py: its header is no linearization point), and counts as an acknowledgement;
other info calls and failed ones acknowledge nothing; a lease id granted twice in the history is not
judged.

Verdict: FALSE on a violation (details name the key, the read and the acknowledgement);
UNKNOWN when no read of a held key fell before an acknowledged deadline (nothing could
have shown a violation, which is never a pass); TRUE otherwise. Pure: reads the history.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from etcdspec.checker.history import History, Operation, decode_bytes
from etcdspec.checker.results import CheckResult
from etcdspec.verdict import Verdict

CHECK_NAME = "LeaseGuarantee"
HELD_PREFIX = "lease-held/"
DEFAULT_TOLERANCE_S = 1.1
"""etcd's default election timeout (1 s) plus 100 ms of scheduling slack."""

_NS = 1_000_000_000


@dataclass(frozen=True)
class Acknowledgement:
    """An ok keep-alive (or grant) of a lease: the TTL the client may count on."""

    op: Operation
    lease: int
    ttl: int

    def deadline(self, tolerance_ns: int) -> int:
        return self.op.call_time + self.ttl * _NS - tolerance_ns

    def describe(self) -> str:
        return (
            f"op {self.op.id} (p{self.op.process}) {self.op.f} of lease {self.lease} ttl {self.ttl}"
        )


@dataclass(frozen=True)
class LeaseViolation:
    """A held key seen gone before an acknowledged deadline of its lease."""

    key: str
    put: Operation
    read: Operation
    ack: Acknowledgement
    tolerance_ns: int

    def describe(self) -> str:
        assert self.read.return_time is not None
        early = (self.ack.deadline(self.tolerance_ns) - self.read.return_time) / _NS
        return (
            f"key {self.key} (lease {self.ack.lease}, attached by op {self.put.id}) was gone "
            f"at op {self.read.id} (p{self.read.process}, a read that returned at "
            f"{self.read.return_time / _NS:.3f} s), {early:.3f} s before the deadline of "
            f"{self.ack.describe()} invoked at {self.ack.op.call_time / _NS:.3f} s "
            f"(deadline = invoke + ttl - tolerance {self.tolerance_ns / _NS:.3f} s): the "
            "lease expired before the acknowledged TTL had passed"
        )

    def events(self) -> tuple[int, ...]:
        indices = [self.put.invoke_index, self.read.invoke_index, self.ack.op.invoke_index]
        for op in (self.read, self.ack.op):
            if op.complete_index is not None:
                indices.append(op.complete_index)
        return tuple(indices)


def is_lease_guarantee_history(history: History) -> bool:
    """Whether the history holds puts of held keys (the `lease-guarantee` workload's)."""
    return any(
        op.f == "put" and _key(op.request).startswith(HELD_PREFIX) for op in history.operations
    )


def check_lease_guarantee(
    history: History, tolerance_s: float = DEFAULT_TOLERANCE_S
) -> CheckResult:
    """The lease guarantee over `history` (see the module docstring)."""
    start = time.monotonic()
    tolerance_ns = int(tolerance_s * _NS)
    acks = _acknowledgements(history)
    revokes = _revoke_invokes(history)
    held = _held_keys(history)
    judged = 0
    violations: list[LeaseViolation] = []
    for op in history.operations:
        if op.f != "range" or op.type != "ok" or op.return_time is None:
            continue
        request = op.request if isinstance(op.request, dict) else {}
        if request.get("range_end") or request.get("serializable"):
            continue
        key = _key(request)
        put = held.get(key)
        if put is None or put.return_time is None or op.call_time <= put.return_time:
            continue
        lease = _int(put.request.get("lease"))
        revoked = revokes.get(lease)
        if revoked is not None and revoked <= op.return_time:
            continue
        pending = [a for a in acks.get(lease, ()) if a.deadline(tolerance_ns) > op.return_time]
        if not pending:
            continue
        judged += 1
        if _found(op.response, key):
            continue
        latest = max(pending, key=lambda a: a.deadline(tolerance_ns))
        violations.append(LeaseViolation(key, put, op, latest, tolerance_ns))
    seconds = time.monotonic() - start
    if violations:
        return CheckResult(
            CHECK_NAME,
            Verdict.FALSE,
            f"{len(violations)} read(s) found a lease's key gone before an acknowledged "
            f"deadline (tolerance {tolerance_s:.3f} s)",
            seconds,
            tuple(v.describe() for v in violations[:20]),
            tuple(sorted({i for v in violations for i in v.events()})),
        )
    n_acks = sum(len(a) for a in acks.values())
    if judged == 0:
        return CheckResult(
            CHECK_NAME,
            Verdict.UNKNOWN,
            f"no read of a held key (prefix {HELD_PREFIX}, one put with a lease) fell before "
            f"an acknowledged deadline ({len(held)} held keys, {n_acks} acknowledgements): "
            "nothing could show a violation",
            seconds,
        )
    return CheckResult(
        CHECK_NAME,
        Verdict.TRUE,
        f"{judged} reads of {len(held)} held keys before {n_acks} acknowledged deadlines "
        f"(tolerance {tolerance_s:.3f} s) found every key still there",
        seconds,
    )


def _int(value: Any) -> int:
    """An integer field of a history (ids may be written as strings); 0 if it is none."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return 0


def _key(request: Any) -> str:
    if not isinstance(request, dict) or "key" not in request:
        return ""
    key = request["key"]
    if type(key) is str and key.isascii():  # its UTF-8 decodes to itself
        return key
    try:
        return decode_bytes(request["key"], "key").decode("utf-8", "replace")
    except ValueError:
        return ""


def _acknowledgements(history: History) -> dict[int, list[Acknowledgement]]:
    granted = Counter(
        _int(op.response.get("ID"))
        for op in history.operations
        if op.f == "lease_grant" and op.type == "ok" and isinstance(op.response, dict)
    )
    acks: dict[int, list[Acknowledgement]] = {}
    for op in history.operations:
        if op.f not in ("lease_grant", "lease_keepalive"):
            continue
        if not isinstance(op.response, dict) or op.response.get("error"):
            continue
        if op.type != "ok" and not (op.type == "info" and op.response.get("answered") is True):
            continue
        lease = _int(op.response.get("ID"))
        ttl = _int(op.response.get("TTL"))
        if lease and ttl > 0 and granted[lease] <= 1:
            acks.setdefault(lease, []).append(Acknowledgement(op, lease, ttl))
    return acks


def _revoke_invokes(history: History) -> dict[int, int]:
    """The earliest invoke time of a client revoke of each lease (fail ones excluded)."""
    first: dict[int, int] = {}
    for op in history.operations:
        if op.f == "lease_revoke" and op.type != "fail" and isinstance(op.request, dict):
            lease = _int(op.request.get("ID", op.request.get("id")))
            first[lease] = min(first.get(lease, op.call_time), op.call_time)
    return first


def _held_keys(history: History) -> dict[str, Operation]:
    """Held keys written by exactly one put (ok, with a lease) and no other write (any
    delete or txn that names the prefix, or deletes a range, spoils them all)."""
    puts: dict[str, list[Operation]] = {}
    for op in history.operations:
        if op.f in ("delete", "txn"):
            request = op.request if isinstance(op.request, dict) else {}
            if HELD_PREFIX in repr(op.request) or request.get("range_end"):
                return {}
        elif op.f == "put":
            key = _key(op.request)
            if key.startswith(HELD_PREFIX):
                puts.setdefault(key, []).append(op)
    return {
        key: ops[0]
        for key, ops in puts.items()
        if len(ops) == 1 and ops[0].type == "ok" and _int(ops[0].request.get("lease"))
    }


def _found(response: Any, key: str) -> bool:
    if not isinstance(response, dict):
        return True  # not a range answer: evidence of nothing
    return any(isinstance(kv, dict) and _key(kv) == key for kv in response.get("kvs") or ())
