"""The sequential models a history is checked against, and what the search asks of them.

Contract:
- A model turns each operation into a `PreparedOp` once (`prepare`, which raises
  ModelInputError for a request or response it cannot read: bad input, exit 4), then
  answers `step(state, prepared)`: the states the operation can lead to from `state`.
  For an ok operation that is the states in which its recorded response is exactly what
  the model answers (none: the operation cannot be linearized there). For an info
  operation it is every state its effect may produce; the search itself covers "never
  took effect". States are immutable and hashable by content.
- A model is non-deterministic in the porcupine sense (a list of next states), which is
  how an operation whose outcome is unknown forks the search.
- `partitions` splits a history into independent sub-histories (P-compositionality)
  when that is sound for the model, else returns None.
- Revision hints (optional; the etcd model gives them): `revision(state)`, and for an ok
  operation the revisions its state may have just before it (`pre_revisions`). The search
  uses them to cut the candidates: revisions only grow, so a write that reports revision
  r is linearized right after revision r-1 was reached.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from etcdspec.checker.history import Operation


class ModelInputError(ValueError):
    """An operation the model cannot read: which one and what was wrong."""

    def __init__(self, op: Operation, message: str) -> None:
        super().__init__(f"{op.describe()}: {message}")
        self.op = op
        self.message = message


class PreparedOp(NamedTuple):
    """An operation with its request and response decoded for one model.

    Immutable; a NamedTuple rather than a frozen dataclass because one is built per
    operation (a 100k-operation history: 0.3 s of frozen-field setting saved). Nothing
    compares or hashes prepared operations: the search refers to them by index."""

    op: Operation
    payload: Any
    # Revision hints: revisions the state may have just before this ok operation.
    pre_revisions: tuple[int, ...] = ()
    # For ok operations: the revision it surely advanced the store to (None: unknown or
    # none). The search then tries it only when nothing else needs the revision before.
    bumps_to: int | None = None
    # For info operations: True when the effect either advances the revision or leaves
    # the state unchanged (the search then tries it only where a revision is missing).
    bumps_or_noop: bool = False
    # Summaries of the writes an info operation may make (e.g. ("put", key, value)),
    # matched against the writes responses observed at a revision.
    signatures: tuple[Hashable, ...] = ()
    # An info write whose written value cannot be summarised (e.g. ignore_value): it
    # may match any observation.
    wildcard: bool = False
    # What an ok operation observes beyond the revision (e.g. ("lease", 7)).
    tags: frozenset[Hashable] = frozenset()
    # For info operations whose effect only an operation tagged so can observe, unless
    # it advances the revision: the search tries it only where a revision is missing or
    # right before such an operation (later is as good as earlier: nothing in between
    # can tell).
    lazy_tag: Hashable = None

    def describe(self) -> str:
        return self.op.describe()


# A PreparedOp's fields after (op, payload), at their defaults: `prepare_all` loops build
# one as tuple.__new__(PreparedOp, (op, payload, *PREPARED_DEFAULTS)), a C call.
PREPARED_DEFAULTS = tuple(PreparedOp._field_defaults[name] for name in PreparedOp._fields[2:])


class CheckModel:
    """Base class of the checker's models; subclasses override what they support."""

    name = "model"

    def init(self) -> Hashable:
        raise TypeError(f"{type(self).__name__} must define init()")

    def prepare(self, op: Operation) -> PreparedOp | None:
        """Decode an operation; None drops it (it cannot affect the verdict)."""
        raise TypeError(f"{type(self).__name__} must define prepare()")

    def prepare_all(self, operations: Sequence[Operation]) -> tuple[list[PreparedOp], int]:
        """`prepare` of every operation: the prepared ones in order and how many were
        dropped. Models override it with a loop that decodes the common shapes inline
        (and calls `prepare` for the rest, so its errors are the same)."""
        prepared: list[PreparedOp] = []
        dropped = 0
        for op in operations:
            dropped += prepare_into(self, op, prepared)
        return prepared, dropped

    def step(self, state: Any, prepared: PreparedOp) -> list[Any]:
        raise TypeError(f"{type(self).__name__} must define step()")

    def flat_ops(
        self, items: Sequence[PreparedOp]
    ) -> tuple[list[int], list[Hashable], list[Hashable]] | None:
        """The operations as the compiled search core reads them (checker/
        compiled_search.py): kinds (READ, SET, CAS, TRANSFORM) and the two arguments of
        each; None (the default): this model has no flat form, the pure loop runs."""
        return None

    def transform(self, arg: Any, state: Any) -> Any:
        """The next state of a TRANSFORM operation with argument `arg` (flat_ops)."""
        raise TypeError(f"{type(self).__name__} has no TRANSFORM operations")

    def stepper(self, prepared: PreparedOp) -> Callable[[Any], Sequence[Any]]:
        """`step` for one operation, as a function of the state: what the search's hot
        loop calls. Models override it with a closure over the decoded payload (no
        unpacking per call); the lists it returns are never changed by the caller."""
        step = self.step
        return lambda state: step(state, prepared)

    def describe_op(self, prepared: PreparedOp) -> str:
        return prepared.op.describe()

    def mismatch(self, state: Any, prepared: PreparedOp) -> str:
        """Why `prepared` cannot be linearized in `state` (for reports)."""
        return "the model's answer differs from the recorded response"

    def partitions(self, ops: Sequence[PreparedOp]) -> dict[str, list[PreparedOp]] | None:
        return None

    def describe_state(self, state: Any) -> str:
        return repr(state)

    def state_json(self, state: Any) -> Any:
        return self.describe_state(state)

    def revision(self, state: Any) -> int | None:
        return None

    def observed_writes(self, ops: Sequence[PreparedOp]) -> dict[int, set[Hashable]]:
        """Revision -> signatures of the writes that ok responses say happened there.

        The search then places at that revision only an info operation with one of those
        signatures: any other would leave the observing response unexplainable."""
        return {}

    def info_possible(self, prepared: PreparedOp, revision: int) -> bool:
        """False when responses prove this info write did not take `revision` (a cut
        that must be sound: every order placing it there would fail anyway)."""
        return True

    def info_state_possible(self, prepared: PreparedOp, state: Any) -> bool:
        """False when responses prove the state an info operation led to can never be
        part of a linearization (a sound cut, like `info_possible`)."""
        return True

    def writes_match(self, state: Any, signatures: set[Hashable]) -> bool:
        """Whether the write that just took `state`'s revision made every write in
        `signatures` (those observed at that revision). False cuts the branch; it must be
        sound: one revision is one write, so an observation it did not make is refuted."""
        return True

    def pinned_revisions(
        self, ops: Sequence[PreparedOp], observed: Mapping[int, set[Hashable]]
    ) -> dict[int, int]:
        """Index in `ops` -> the only revision that info operation can take: it is the one
        operation that can make a write observed there (observations as in
        `observed_writes`). The search places it nowhere else (sound: every operation
        takes effect at most once, and the observation needs it)."""
        return {}

    def synthetic_ops(self, ops: Sequence[PreparedOp], next_id: int) -> list[PreparedOp]:
        """Extra info operations the environment may perform (e.g. lease expiry)."""
        return []

    def impossible(self, ops: Sequence[PreparedOp]) -> list[tuple[int, str]]:
        """(index in `ops`, why) of the ok operations whose response no state the
        partition can reach gives (e.g. a read of a value nobody wrote), in the order
        they returned. The search refutes the partition by the first at once instead of
        ruling out every order before it; so it must be sound."""
        return []

    def overwritten(self, ops: Sequence[PreparedOp]) -> list[tuple[int, str]]:
        """Like `impossible`, for ok reads of a value that something could have left but
        that was surely overwritten before the read (`overwritten_reads`). The search
        tries one turn first, for the report its deepest configuration gives; if that
        does not decide, the first of these refutes the partition. Must be sound."""
        return []


def prepare_into(model: CheckModel, op: Operation, out: list[PreparedOp]) -> int:
    """`model.prepare(op)` appended to `out`: 1 when it drops the operation, else 0. The
    tail of every `prepare_all` loop (the shapes it does not decode inline go through
    `prepare`, so its items and errors are `prepare`'s)."""
    item = model.prepare(op)
    if item is None:
        return 1
    out.append(item)
    return 0


def ok_reads_by_return(ops: Sequence[PreparedOp], read: str) -> list[tuple[int, int]]:
    """(return position, index) of each ok operation of `f` `read`, in the order they
    returned (ties by index): what a model's `impossible` sweeps."""
    reads = [
        (p.op.ret or 0, i) for i, p in enumerate(ops) if p.payload[1] == read and p.op.type == "ok"
    ]
    reads.sort()
    return reads


def overwritten_reads(
    ops: Sequence[PreparedOp],
    reads: Sequence[int],
    writes: Sequence[int],
    read_value: Callable[[PreparedOp], Any],
    writers_of: Callable[[Any], Iterable[int]],
    initial: Any,
) -> list[tuple[int, int | None, int]]:
    """The ok reads in `reads` (indices in `ops`) that no linearization can give their
    value because whatever could have left it was surely overwritten first: for each,
    (read, the latest-returning write that could have left the value or None for the
    initial state, an ok write that ran entirely between that write and the read).

    `writes` are every operation that may change the state (ok and info); `writers_of(v)`
    the indices of those whose effect can leave the state equal to v (e.g. a put of v).
    Sound: in a linearization, the last write placed before the read leaves the value the
    read returns, so it is one of `writers_of(v)` invoked before the read returned (or
    none, and v is `initial`); an ok write that was invoked after it returned and returned
    before the read was invoked is placed between them, so it cannot be the last. An info
    write has no return, so it is never overwritten for sure."""
    ok_writes = sorted((ops[w].op.call, ops[w].op.ret, w) for w in writes if ops[w].op.type == "ok")
    calls = [call for call, _, _ in ok_writes]
    # From position k on (in call order): the earliest return and whose it is.
    suffix: list[tuple[int, int]] = [(1 << 62, -1)] * (len(ok_writes) + 1)
    for k in range(len(ok_writes) - 1, -1, -1):
        _, ret, w = ok_writes[k]
        suffix[k] = min(suffix[k + 1], (ret or 0, w))
    # Per value read: its ok writers' calls in order with the latest return so far (the
    # latest-returning writer is the hardest to overwrite: whatever overwrites it
    # overwrites every earlier one), and the earliest call of an info writer.
    by_value: dict[Any, tuple[list[int], list[tuple[int, int]], int]] = {}
    found = []
    for read in reads:
        op = ops[read].op
        value = read_value(ops[read])
        index = by_value.get(value)
        if index is None:
            writers = sorted((ops[w].op.call, w) for w in writers_of(value))
            ok_calls: list[int] = []
            latest: list[tuple[int, int]] = []
            info_call = 1 << 62
            for call, w in writers:
                ret = ops[w].op.ret
                if ret is None:
                    info_call = min(info_call, call)
                    continue
                ok_calls.append(call)
                latest.append(max(latest[-1], (ret, w)) if latest else (ret, w))
            index = by_value[value] = (ok_calls, latest, info_call)
        ok_calls, latest, info_call = index
        if info_call < (op.ret or 0):
            continue  # an info write may take effect right before the read
        invoked = bisect.bisect_left(ok_calls, op.ret or 0)  # writers invoked before it returned
        if invoked:
            ret, writer = latest[invoked - 1]
            last: tuple[int, int | None] = (ret, writer)
        elif value == initial:
            last = (-1, None)  # no write at all: overwritten by any ok write before
        else:
            continue  # nothing could leave it: `impossible`'s phantom read
        first, overwriter = suffix[bisect.bisect_right(calls, last[0])]
        if first < op.call:
            found.append((read, last[1], overwriter))
    return found


def model_names() -> tuple[str, ...]:
    return ("register", "kv", "etcd")


def get_model(name: str) -> CheckModel:
    """The model called `name` (register, kv or etcd)."""
    if name == "register":
        from etcdspec.checker.model_register import RegisterModel

        return RegisterModel()
    if name == "kv":
        from etcdspec.checker.model_kv import KvModel

        return KvModel()
    if name == "etcd":
        from etcdspec.checker.model_etcd import EtcdModel

        return EtcdModel()
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(model_names())}")
