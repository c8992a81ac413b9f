"""A Hypothesis strategy of small register or kv histories for the checker's tests: a few
processes invoking and completing operations interleaved at random, an info completion
retiring its process (Jepsen's rule: a later operation takes a new id), and operations
still open at the end completed or left open at random. The values drawn are the
caller's, so a test can mix types (1, 1.0, True) or keep to plain ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from etcdspec.checker.history import HistoryBuilder, Operation


@st.composite
def histories(
    draw: st.DrawFn,
    model: str,
    *,
    max_events: int,
    register_values: Sequence[Any],
    kv_values: Sequence[Any],
    put_texts: Sequence[str],
) -> list[Operation]:
    """Up to `max_events` events by up to 4 processes at a time. Register reads answer
    one of `register_values` (writes and cas use all but its first, None); kv gets
    answer one of `kv_values`, puts write one of `put_texts`, appends ",1" or ",2"."""
    builder = HistoryBuilder()
    open_ops: dict[int, tuple[str, Any, Any]] = {}
    live = list(range(draw(st.integers(1, 4))))
    next_process = len(live)
    for _ in range(draw(st.integers(1, max_events))):
        process = draw(st.sampled_from(live))
        if process in open_ops:
            f, request, response = open_ops.pop(process)
            kind = draw(st.sampled_from(["ok", "ok", "ok", "info"]))
            builder.add(process, kind, f, response if kind == "ok" else request)
            if kind == "info":
                live[live.index(process)] = next_process
                next_process += 1
            continue
        key = draw(st.sampled_from(["a", "b"]))
        if model == "kv":
            f = draw(st.sampled_from(["get", "put", "append"]))
            if f == "get":
                request = {"key": key}
                response = {"key": key, "value": draw(st.sampled_from(kv_values))}
            else:
                text = draw(st.sampled_from(put_texts if f == "put" else [",1", ",2"]))
                request = response = {"key": key, "value": text}
        else:
            f = draw(st.sampled_from(["read", "write", "cas"]))
            value = draw(st.sampled_from(register_values[1:]))
            if f == "read":
                request = {"key": key, "value": None}
                response = {"key": key, "value": draw(st.sampled_from(register_values))}
            elif f == "write":
                request = response = {"key": key, "value": value}
            else:
                old = draw(st.sampled_from(register_values[1:]))
                request = response = {"key": key, "value": [old, value]}
        builder.add(process, "invoke", f, request)
        open_ops[process] = (f, request, response)
    for process, (f, _request, response) in sorted(open_ops.items()):
        if draw(st.booleans()):
            builder.add(process, "ok", f, response)
    return list(builder.history().operations)
