"""Import of Jepsen's history.edn into the project's history (JSON Lines events).

Contract:
- Each top-level EDN map is one Jepsen op: :index, :time, :type (:invoke :ok :fail
  :info), :process, :f, :value, optional :error. Ops of non-integer processes (the
  :nemesis) are not client operations and are left out (noted). Missing :index or
  :time are taken from the position, keeping order.
- Registers (:read, :write, :cas [old new]) convert one to one for the `register`
  model. Jepsen's independent keys — values [k v], cas [k [old new]] — become
  {"key": "k", "value": ...}: the models check them key by key.
- For the `kv` model, :read/:get become get, :write/:put put, :append append; values
  become strings (a map from key to string), nil stays null.
- The result goes through the same validation as a JSON Lines history
  (`build_history`), so a Jepsen history that breaks its own rules is rejected with
  the op's position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from etcdspec.checker.edn import Char, EdnError, EdnSet, Keyword, Symbol, Tagged, parse_edn
from etcdspec.checker.history import History, HistoryError, HistoryEvent, build_history

_KV_F = {"read": "get", "get": "get", "write": "put", "put": "put", "append": "append"}


def read_jepsen(path: Path | str, model: str = "register") -> History:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise HistoryError(str(path), 0, f"cannot read ({error.strerror})") from error
    try:
        return import_jepsen(text, model, source=str(path))
    except EdnError as error:
        if text.lstrip().startswith('{"'):
            raise HistoryError(
                str(path),
                error.line,
                f"{error.message}; it reads as JSON Lines: pass --format jsonl",
            ) from error
        raise


def import_jepsen(text: str, model: str = "register", source: str = "<edn>") -> History:
    """Convert the text of a Jepsen history.edn to a validated History for `model`."""
    values = parse_edn(text, source)
    ops: list[dict[str, Any]] = []
    for position, value in enumerate(values, start=1):
        if not isinstance(value, dict):
            raise HistoryError(source, position, f"op {position} is not a map: {value!r}")
        ops.append({_name(k): v for k, v in value.items()})
    independent = any(
        _name(op.get("f")) in ("read", "write")
        and isinstance(op.get("value"), list)
        and len(op["value"]) == 2
        and not isinstance(op["value"][0], list)
        for op in ops
    )
    events: list[HistoryEvent] = []
    notes: list[str] = []
    skipped = 0
    for position, op in enumerate(ops, start=1):
        process = op.get("process")
        if not isinstance(process, int) or isinstance(process, bool):
            skipped += 1
            continue
        type_ = _name(op.get("type"))
        if type_ not in ("invoke", "ok", "fail", "info"):
            raise HistoryError(source, position, f"op {position}: unknown :type {type_!r}")
        f = _name(op.get("f"))
        index = op.get("index", position - 1)
        time = op.get("time", index)
        if not isinstance(index, int) or not isinstance(time, int):
            raise HistoryError(
                source, position, f"op {position}: :index and :time must be integers"
            )
        value = _convert_value(op.get("value"), independent, f, model, source, position)
        if model == "kv":
            if f not in _KV_F:
                raise HistoryError(source, position, f"op {position}: kv has no :{f}")
            f = _KV_F[f]
        error = op.get("error")
        events.append(
            HistoryEvent(
                index=index,
                process=process,
                type=type_,
                f=f,
                value=value,
                time=time,
                line=position,
                error=_to_json(error) if error is not None else None,
            )
        )
    history = build_history(events, source)
    if skipped:
        notes.append(f"{skipped} ops of non-client processes (e.g. :nemesis) left out")
    return History(
        history.events,
        history.operations,
        history.watch_events,
        source,
        history.notes + tuple(notes),
    )


def _name(value: Any) -> str:
    if isinstance(value, (Keyword, Symbol)):
        return value.name
    return str(value)


def _convert_value(
    value: Any, independent: bool, f: str, model: str, source: str, position: int
) -> Any:
    if independent:
        if value is None:
            return None
        if not (isinstance(value, list) and len(value) == 2):
            raise HistoryError(
                source, position, f"op {position}: independent ops need the value [key value]"
            )
        key, inner = value
        return {"key": str(_to_json(key)), "value": _scalar(inner, model)}
    if model == "kv":
        raise HistoryError(
            source,
            position,
            f"op {position}: the kv model needs independent [key value] ops; "
            "a single register's ops read as a register history: pass --model register",
        )
    return _scalar(value, model)


def _scalar(value: Any, model: str) -> Any:
    converted = _to_json(value)
    if model == "kv" and converted is not None and not isinstance(converted, (str, list)):
        return str(converted)
    return converted


def _to_json(value: Any) -> Any:
    if isinstance(value, (Keyword, Symbol)):
        return value.name
    if isinstance(value, Char):
        return value.char
    if isinstance(value, EdnSet):
        return [_to_json(v) for v in value.items]
    if isinstance(value, Tagged):
        return _to_json(value.value)
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(_to_json(k)): _to_json(v) for k, v in value.items()}
    return value
