"""What the checker's speed tests compare: a result or a history as plain fields, with the
times (the one thing allowed to differ between two checks) left out."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from etcdspec.checker.history import History


def whole_result(result: Any) -> dict[str, Any]:
    """A linearizability result as a dict, without its seconds or its partitions'."""
    out = asdict(result)
    out.pop("seconds", None)
    for part in out.get("partitions", ()):
        part.pop("seconds", None)
    return out


def history_fields(history: History) -> dict[str, Any]:
    """A History's events, operations, watch events, notes and source, field by field."""
    return {
        "events": [vars(e) if hasattr(e, "__dict__") else e for e in history.events],
        "operations": [vars(op) for op in history.operations],
        "watch": [vars(e) for e in history.watch_events],
        "notes": history.notes,
        "source": history.source,
    }
