"""The `kv` model: a map of string keys to string values with get, put and append.

Contract:
- Every operation names one key: value {"key": k, "value": v}; a get's ok response is
  {"key": k, "value": v or null} (null: the key is absent). put sets the value; append
  concatenates to it (an absent key counts as "").
- Keys never interact, so the history is checked key by key (P-compositionality): each
  partition's state is just that key's value.
- fail operations and info gets are dropped; an info put or append may have taken
  effect at any time after its invoke, or never.
- Cuts for the search (sound): `impossible` names gets of a value no put or append
  invoked before they returned can leave; `overwritten` gets whose every possible writer
  was surely overwritten first (models.overwritten_reads); `stepper` is `step` per op.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from etcdspec.checker.compiled_search import (
    KV as KV_CODE,
)
from etcdspec.checker.compiled_search import (
    READ,
    SET,
    TRANSFORM,
    compiled_partitions,
    compiled_prepare,
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

_FLAT_KIND = {"get": READ, "put": SET, "append": TRANSFORM}  # flat_ops' kinds


class KvModel(CheckModel):
    name = "kv"
    flat_code = KV_CODE  # how the C extension decodes it (compiled_search)

    def init(self) -> Hashable:
        return None

    def prepare(self, op: Operation) -> PreparedOp | None:
        if op.type == "fail":
            return None
        if op.f not in ("get", "put", "append"):
            raise ModelInputError(op, f'kv has get, put and append, not "{op.f}"')
        request = op.request
        if not isinstance(request, dict) or not isinstance(request.get("key"), str):
            raise ModelInputError(op, 'the value must be {"key": "k", ...}')
        key = request["key"]
        if op.f == "get":
            if op.type == "info":
                return None
            response = op.response
            if not isinstance(response, dict) or "value" not in response:
                raise ModelInputError(op, 'a get response must be {"key": k, "value": v}')
            return PreparedOp(op, (key, "get", _text(op, response["value"], allow_null=True)))
        return PreparedOp(op, (key, op.f, _text(op, request.get("value"), allow_null=False)))

    def prepare_all(self, operations: Sequence[Operation]) -> tuple[list[PreparedOp], int]:
        """`prepare` of every operation: in C when the compiled core is built
        (compiled_search.compiled_prepare), else `prepare_all_pure`; the same items."""
        compiled = compiled_prepare(self, self.flat_code, operations)
        return compiled if compiled is not None else self.prepare_all_pure(operations)

    def prepare_all_pure(self, operations: Sequence[Operation]) -> tuple[list[PreparedOp], int]:
        """`prepare` inline for well-formed operations; the rest go through it."""
        out: list[PreparedOp] = []
        dropped = 0
        new, tail = tuple.__new__, PREPARED_DEFAULTS
        for op in operations:
            kind, f, request = op.type, op.f, op.request
            if kind == "fail":
                dropped += 1
                continue
            if type(request) is dict and type(key := request.get("key")) is str:
                if f == "get":
                    if kind == "info":
                        dropped += 1
                        continue
                    response = op.response
                    if type(response) is dict and "value" in response:
                        value = response["value"]
                        if value is None or type(value) is str:
                            out.append(new(PreparedOp, (op, (key, f, value), *tail)))
                            continue
                elif f == "put" or f == "append":
                    value = request.get("value")
                    if type(value) is str:
                        out.append(new(PreparedOp, (op, (key, f, value), *tail)))
                        continue
            dropped += prepare_into(self, op, out)
        return out, dropped

    def step(self, state: Any, prepared: PreparedOp) -> list[Any]:
        _, f, arg = prepared.payload
        if f == "get":
            return [state] if state == arg else []
        if f == "put":
            return [arg]
        return [(state or "") + arg]

    def stepper(self, prepared: PreparedOp) -> Callable[[Any], Sequence[Any]]:
        _, f, arg = prepared.payload
        hit = [arg]
        if f == "get":
            return lambda state: hit if state == arg else ()
        if f == "put":
            return lambda state: hit
        return lambda state: [(state or "") + arg]

    def flat_ops(
        self, items: Sequence[PreparedOp]
    ) -> tuple[list[int], list[Hashable], list[Hashable]] | None:
        payloads = [p[1] for p in items]
        kind_of = _FLAT_KIND
        return (
            [kind_of[payload[1]] for payload in payloads],
            [payload[2] for payload in payloads],
            [None] * len(items),
        )

    def transform(self, arg: Any, state: Any) -> Any:
        return (state or "") + arg

    def impossible(self, ops: Sequence[PreparedOp]) -> list[tuple[int, str]]:
        """Gets of a value no write invoked before the get returned can leave: it is
        neither a put's value nor ends with an appended one; in the order they returned.

        One pass over the writes (each put value's and each appended value's earliest
        call position; those invoked after the last get returned are never looked at,
        as a sweep get by get would not), then one over the gets: what that sweep
        (tests/checker/test_checker_fixed_cost.py keeps it as the reference) decides,
        without a Python step per get and write pair (docs/benchmarks.md, Session 16:
        the fixed cost per check)."""
        gets = ok_reads_by_return(ops, "get")
        if not gets:
            return []
        last = gets[-1][0]
        put_call: dict[str, int] = {}  # value -> the earliest call of a put of it
        append_call: dict[str, int] = {}  # appended value -> the earliest call
        lengths: set[int] = set()  # the lengths of the appended values
        for p in ops:
            _, f, arg = p.payload
            call = p.op.call
            if f == "get" or call >= last:
                continue
            earliest = put_call if f == "put" else append_call
            known = earliest.get(arg)
            if known is None or call < known:
                earliest[arg] = call
            if f != "put":
                lengths.add(len(arg))
        sizes = sorted(lengths)
        found = []
        for ret, read in gets:
            key, _, value = ops[read].payload
            if value is None or put_call.get(value, ret) < ret:
                continue
            if value == "" and append_call.get("", ret) < ret:
                continue
            if any(0 < n <= len(value) and append_call.get(value[-n:], ret) < ret for n in sizes):
                continue
            found.append(
                (
                    read,
                    f"get {key} returned {json.dumps(value)}, which no put or append of "
                    f"{key} invoked before it returned can leave (none writes that value "
                    "or ends it)",
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
        """Gets whose value every put or append that could leave it was surely
        overwritten before (`overwritten_reads`)."""
        puts: dict[str, list[int]] = {}
        appends: dict[int, dict[str, list[int]]] = {}  # length -> value -> indices
        reads, writes = [], []
        for i, prepared in enumerate(ops):
            _, f, arg = prepared.payload
            if f == "get":
                if prepared.op.type == "ok":
                    reads.append(i)
            else:
                writes.append(i)
                if f == "put":
                    puts.setdefault(arg, []).append(i)
                else:
                    appends.setdefault(len(arg), {}).setdefault(arg, []).append(i)

        def writers_of(value: str | None) -> list[int]:
            if value is None:
                return []
            found = list(puts.get(value, ()))
            for n, by_value in appends.items():
                if n <= len(value):
                    found.extend(by_value.get(value[len(value) - n :], ()))
            return found

        return overwritten_reads(
            ops, reads, writes, lambda p: p.payload[2], writers_of, initial=None
        )

    def mismatch(self, state: Any, prepared: PreparedOp) -> str:
        key, _, arg = prepared.payload
        return f"get {key} returned {json.dumps(arg)} but the key holds {json.dumps(state)}"

    def partitions(self, ops: Sequence[PreparedOp]) -> dict[str, list[PreparedOp]] | None:
        grouped = compiled_partitions(ops)
        if grouped is not None:
            return grouped
        parts: dict[str, list[PreparedOp]] = {}
        for prepared in ops:
            parts.setdefault(prepared.payload[0], []).append(prepared)
        return parts

    def describe_state(self, state: Any) -> str:
        return "absent" if state is None else f"value = {json.dumps(state)}"

    def state_json(self, state: Any) -> Any:
        return {"value": state}


def _overwritten_reason(
    ops: Sequence[PreparedOp], read: int, writer: int | None, overwriter: int
) -> str:
    key, _, value = ops[read].payload
    source = "the initial state" if writer is None else ops[writer].op.describe()
    return (
        f"get {key} returned {json.dumps(value)}, but the last write that could leave it "
        f"({source}) was surely overwritten before the get was invoked: "
        f"{ops[overwriter].op.describe()} ran entirely between them"
    )


def _text(op: Operation, value: Any, allow_null: bool) -> str | None:
    if value is None and allow_null:
        return None
    if not isinstance(value, str):
        raise ModelInputError(op, f"kv values are strings, got {json.dumps(value)}")
    return value
