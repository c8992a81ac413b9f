"""The `register` model: one register per key with read, write and cas [old, new].

Contract (Jepsen's register workloads):
- Values are JSON scalars; the initial value is null (Jepsen's nil).
- A plain history has values directly (read -> value, write v, cas [old, new]); a keyed
  history (Jepsen's independent keys) has {"key": k, "value": ...} and is checked key by
  key, which is sound because keys never interact (P-compositionality).
- read ok: the register holds the value read. write: sets it. cas ok: the register
  held `old` and now holds `new`. fail operations and info reads are dropped: they
  cannot have changed the register. An info write or cas may have taken effect or not.
- Cuts for the search (sound): `impossible` names reads of a value no write or cas
  invoked before they returned writes; `overwritten` reads whose every possible writer
  was surely overwritten first (models.overwritten_reads); `stepper` is `step` per op.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from etcdspec.checker.compiled_search import (
    CAS,
    READ,
    SET,
    compiled_partitions,
    compiled_prepare,
)
from etcdspec.checker.compiled_search import (
    REGISTER as REGISTER_CODE,
)
from etcdspec.checker.history import Operation
from etcdspec.checker.models import (
    PREPARED_DEFAULTS,
    CheckModel,
    ModelInputError,
    PreparedOp,
    ok_reads_by_return,
    overwritten_reads,
    prepare_into,
)

_NO_KEY = ""
_KEYED = frozenset({"key", "value"})  # the fields of a keyed value
_FLAT_KIND = {"read": READ, "write": SET, "cas": CAS}  # flat_ops' kinds
_MALFORMED = object()  # prepare_all: a keyed value prepare must reject


class RegisterModel(CheckModel):
    name = "register"
    flat_code = REGISTER_CODE  # how the C extension decodes it (compiled_search)

    def init(self) -> Hashable:
        return None

    def prepare(self, op: Operation) -> PreparedOp | None:
        if op.type == "fail":
            return None
        if op.f not in ("read", "write", "cas"):
            raise ModelInputError(op, f'register has read, write and cas, not "{op.f}"')
        key, request = _split_key(op, op.request)
        if op.f == "read":
            if op.type == "info":
                return None
            _, value = _split_key(op, op.response)
            return PreparedOp(op, (key, "read", _scalar(op, value)))
        if op.f == "write":
            return PreparedOp(op, (key, "write", _scalar(op, request)))
        if not (isinstance(request, list) and len(request) == 2):
            raise ModelInputError(op, "cas needs the value [old, new]")
        return PreparedOp(op, (key, "cas", (_scalar(op, request[0]), _scalar(op, request[1]))))

    def prepare_all(self, operations: Sequence[Operation]) -> tuple[list[PreparedOp], int]:
        """`prepare` of every operation: in C when the compiled core is built
        (compiled_search.compiled_prepare), else `prepare_all_pure`; the same items."""
        compiled = compiled_prepare(self, self.flat_code, operations, _NO_KEY)
        return compiled if compiled is not None else self.prepare_all_pure(operations)

    def prepare_all_pure(self, operations: Sequence[Operation]) -> tuple[list[PreparedOp], int]:
        """`prepare` inline for well-formed operations; the rest go through it."""
        out: list[PreparedOp] = []
        dropped = 0
        new, tail, keyed = tuple.__new__, PREPARED_DEFAULTS, _KEYED
        for op in operations:
            kind, f, request = op.type, op.f, op.request
            if kind == "fail":
                dropped += 1
                continue
            key = _NO_KEY
            if isinstance(request, dict):
                if "key" not in request or not request.keys() <= keyed:
                    request = _MALFORMED
                else:
                    key, request = str(request["key"]), request.get("value")
            if f == "read":
                if kind == "info" and request is not _MALFORMED:
                    dropped += 1
                    continue
                value = op.response
                if isinstance(value, dict):
                    if "key" in value and value.keys() <= keyed:
                        value = value.get("value")
                    else:
                        value = _MALFORMED
                if (
                    request is not _MALFORMED
                    and value is not _MALFORMED
                    and not isinstance(value, (dict, list))
                ):
                    out.append(new(PreparedOp, (op, (key, f, value), *tail)))
                    continue
            elif f == "write":
                if request is not _MALFORMED and not isinstance(request, (dict, list)):
                    out.append(new(PreparedOp, (op, (key, f, request), *tail)))
                    continue
            elif f == "cas" and type(request) is list and len(request) == 2:
                old, new_value = request
                if not isinstance(old, (dict, list)) and not isinstance(new_value, (dict, list)):
                    out.append(new(PreparedOp, (op, (key, f, (old, new_value)), *tail)))
                    continue
            dropped += prepare_into(self, op, out)
        return out, dropped

    def step(self, state: Any, prepared: PreparedOp) -> list[Any]:
        _, f, arg = prepared.payload
        if f == "read":
            return [state] if state == arg else []
        if f == "write":
            return [arg]
        old, new = arg
        return [new] if state == old else []

    def stepper(self, prepared: PreparedOp) -> Callable[[Any], Sequence[Any]]:
        _, f, arg = prepared.payload
        if f == "read":
            hit = [arg]
            return lambda state: hit if state == arg else ()
        if f == "write":
            written = [arg]
            return lambda state: written
        old, new = arg
        swapped = [new]
        return lambda state: swapped if state == old else ()

    def flat_ops(
        self, items: Sequence[PreparedOp]
    ) -> tuple[list[int], list[Hashable], list[Hashable]] | None:
        payloads = [p[1] for p in items]
        kinds = [_FLAT_KIND[payload[1]] for payload in payloads]
        a = [arg[0] if f == "cas" else arg for _, f, arg in payloads]
        b = [arg[1] if f == "cas" else None for _, f, arg in payloads]
        return kinds, a, b

    def impossible(self, ops: Sequence[PreparedOp]) -> list[tuple[int, str]]:
        """Reads of a value no write or cas invoked before the read returned writes, in
        the order they returned.

        One pass over the writes (each value's earliest call position; those invoked
        after the last read returned are never looked at, as a sweep read by read would
        not), then one over the reads: what that sweep (tests/checker/
        test_checker_fixed_cost.py keeps it as the reference) decides, without a Python
        step per read and write pair (a refuted register partition's sweep was most of
        its check: docs/benchmarks.md, Session 16: the fixed cost per check)."""
        reads = ok_reads_by_return(ops, "read")
        if not reads:
            return []
        last = reads[-1][0]
        first_call: dict[Any, int] = {}  # value -> the earliest call of a write of it
        for p in ops:
            _, f, arg = p.payload
            call = p.op.call
            if f != "read" and call < last:
                value = arg if f == "write" else arg[1]
                known = first_call.get(value)
                if known is None or call < known:
                    first_call[value] = call
        found = []
        for ret, read in reads:
            value = ops[read].payload[2]
            if value is None:
                continue
            earliest = first_call.get(value)
            if earliest is None or earliest >= ret:
                found.append(
                    (
                        read,
                        f"read {json.dumps(value)}, which no write or cas invoked before "
                        "the read returned writes",
                    )
                )
        return found

    def overwritten(self, ops: Sequence[PreparedOp]) -> list[tuple[int, str]]:
        """Reads of a value whose every possible writer was surely overwritten first
        (`overwritten_reads`), with why, in the order they returned."""
        found = [
            (read, _overwritten_reason(ops, read, writer, overwriter))
            for read, writer, overwriter in self._overwritten(ops)
        ]
        found.sort(key=lambda item: ops[item[0]].op.ret or 0)
        return found

    def _overwritten(self, ops: Sequence[PreparedOp]) -> list[tuple[int, int | None, int]]:
        """Reads whose value every write or cas that could leave it was surely
        overwritten before (`overwritten_reads`)."""
        by_value: dict[Any, list[int]] = {}
        reads, writes = [], []
        for i, prepared in enumerate(ops):
            _, f, arg = prepared.payload
            if f == "read":
                if prepared.op.type == "ok":
                    reads.append(i)
                continue
            writes.append(i)
            by_value.setdefault(arg if f == "write" else arg[1], []).append(i)
        return overwritten_reads(
            ops,
            reads,
            writes,
            lambda p: p.payload[2],
            lambda value: by_value.get(value, ()),
            initial=None,
        )

    def mismatch(self, state: Any, prepared: PreparedOp) -> str:
        _, f, arg = prepared.payload
        if f == "read":
            return f"read {json.dumps(arg)} but the register holds {json.dumps(state)}"
        if f == "cas":
            return f"cas from {json.dumps(arg[0])} but the register holds {json.dumps(state)}"
        return "a write always succeeds"

    def partitions(self, ops: Sequence[PreparedOp]) -> dict[str, list[PreparedOp]] | None:
        grouped = compiled_partitions(ops)
        if grouped is not None:
            return None if list(grouped) == [_NO_KEY] else grouped
        if {prepared[1][0] for prepared in ops} == {_NO_KEY}:
            return None  # a plain register: one partition (a set comprehension is cheap)
        parts: dict[str, list[PreparedOp]] = {}
        for prepared in ops:
            parts.setdefault(prepared.payload[0], []).append(prepared)
        if list(parts) == [_NO_KEY]:
            return None
        return parts

    def describe_state(self, state: Any) -> str:
        return f"register = {json.dumps(state)}"

    def state_json(self, state: Any) -> Any:
        return {"register": state}


def _overwritten_reason(
    ops: Sequence[PreparedOp], read: int, writer: int | None, overwriter: int
) -> str:
    value = ops[read].payload[2]
    source = "the initial state" if writer is None else ops[writer].op.describe()
    return (
        f"read {json.dumps(value)}, but the last write that could leave it ({source}) was "
        f"surely overwritten before the read was invoked: {ops[overwriter].op.describe()} "
        "ran entirely between them"
    )


def _split_key(op: Operation, value: Any) -> tuple[str, Any]:
    if isinstance(value, dict):
        if set(value) - {"key", "value"} or "key" not in value:
            raise ModelInputError(op, 'a keyed value must be {"key": k, "value": v}')
        return str(value["key"]), value.get("value")
    return _NO_KEY, value


def _scalar(op: Operation, value: Any) -> Hashable:
    if isinstance(value, (dict, list)):
        raise ModelInputError(op, f"register values are scalars, got {json.dumps(value)}")
    return value
