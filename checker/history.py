"""Histories: Jepsen's operation history as JSON Lines — the events, the paired operations,
a validating reader and a writer.

Contract (DESIGN.md, "History format"; the schema is checker/history.schema.json):
- One JSON object per line: index, process, type (invoke|ok|fail|info|watch), f, value,
  time (monotonic nanoseconds). Blank lines are skipped.
- A process runs one operation at a time: invoke, then exactly one of ok, fail or info
  with the same f. After info the process never invokes again. An invoke with no
  completion by the end of the history is indeterminate, as in Jepsen: it becomes info.
- Watch stream events (type "watch") do not take part in that pairing.
- Schema version 2 adds an optional `user` on an invoke: the user whose token the
  request carried ("" for a request sent without a token while auth may be on). An
  operation without it is not judged against permissions. Version 1 histories (no
  `user` anywhere) read as before.
- Anything else is rejected with a HistoryError naming the line and what to do;
  `etcdspec check` maps it to exit 4 (bad input).
- Keys and values are JSON strings; bytes that are not UTF-8 are {"b64": "..."}:
  `decode_bytes` and `encode_bytes` convert.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, Any, TypeVar

from etcdspec.checker.gc_pause import paused_gc

_T = TypeVar("_T")


def _find_orjson_loads() -> Callable[[str | bytes], Any] | None:
    """orjson.loads (a dependency: it parses the JSON lines about twice as fast), or None
    where it is missing; `_parse_lines` reads the same with or without it."""
    try:
        module = importlib.import_module("orjson")
    except ImportError:
        return None
    loads: Callable[[str | bytes], Any] = module.loads
    return loads


_orjson_loads = _find_orjson_loads()


def _find_compiled_reader() -> Any:
    """The C loops of the reader (checker/_histread.c: `read_plain` over plainly valid
    lines, `assemble` of the operations), or None where the extension is not built;
    `_history_of_lines` reads the same with or without them."""
    try:
        return importlib.import_module("etcdspec.checker._histread")
    except ImportError:
        return None


_compiled_reader = _find_compiled_reader()
_read_plain: Callable[..., Any] | None = getattr(_compiled_reader, "read_plain", None)
_assemble: Callable[..., Any] | None = getattr(_compiled_reader, "assemble", None)
_COMPILED_READ = True  # use the C loops when they are built (tests switch them off)

_new_object = object.__new__
_set_attribute = object.__setattr__


def assembled(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of `cls`, a frozen dataclass with a `__dict__` (not slots) and no
    `__post_init__`, whose fields are `fields` (every field, by name): what `cls(**fields)`
    makes, with the dict set at once instead of one frozen `__setattr__` per field. The
    reader builds hundreds of thousands of events and operations this way (a third of
    their cost); test_checker_read_speed checks it gives what the constructor gives."""
    made = _new_object(cls)
    _set_attribute(made, "__dict__", fields)
    return made


SCHEMA_VERSION = 2
OP_TYPES = ("invoke", "ok", "fail", "info")
EVENT_TYPES = (*OP_TYPES, "watch")
_FIELD_ORDER = ("index", "process", "type", "f", "user", "value", "error", "time")


class HistoryError(ValueError):
    """A history that is not well formed: where (source:line) and what was wrong. Line 0
    is the file as a whole (it cannot be read, or holds no operation)."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}" if line > 0 else f"{source}: {message}")
        self.source = source
        self.line = line
        self.message = message


@dataclass(frozen=True, eq=False)
class HistoryEvent:
    """One line of a history, as read (value is the parsed JSON, left as is)."""

    index: int
    process: int | str
    type: str
    f: str
    value: Any
    time: int
    line: int = 0  # 1-based source line; 0 when built in memory
    error: Any = None
    user: str | None = None  # who the request's token named (schema version 2)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "process": self.process,
            "type": self.type,
            "f": self.f,
        }
        if self.user is not None:
            out["user"] = self.user
        out["value"] = self.value
        if self.error is not None:
            out["error"] = self.error
        out["time"] = self.time
        return out

    def describe(self) -> str:
        return (
            f"#{self.index} p{self.process} {self.type} {self.f} "
            f"{json.dumps(self.value, sort_keys=True, ensure_ascii=False)}"
        )


@dataclass(frozen=True, eq=False)
class Operation:
    """An invoke paired with its completion: the unit the linearizability check orders.

    `call` and `ret` are positions in the event list (ret None: info, returns never).
    """

    id: int
    process: int | str
    f: str
    request: Any
    type: str  # "ok", "fail" or "info"
    response: Any
    call: int
    ret: int | None
    call_time: int
    return_time: int | None
    invoke_index: int
    complete_index: int | None
    user: str | None = None  # who the token named; None: not recorded, not judged

    def describe(self) -> str:
        request = json.dumps(self.request, sort_keys=True, ensure_ascii=False)
        if self.user is not None:
            request = f"as {self.user or '<no token>'} {request}"
        if self.type == "info":
            return f"op {self.id} p{self.process} {self.f} {request} -> info (unknown)"
        response = json.dumps(self.response, sort_keys=True, ensure_ascii=False)
        return f"op {self.id} p{self.process} {self.f} {request} -> {self.type} {response}"


@dataclass(frozen=True, eq=False)
class History:
    """A validated history: its events, the operations they pair into, its watch events."""

    events: tuple[HistoryEvent, ...]
    operations: tuple[Operation, ...]
    watch_events: tuple[HistoryEvent, ...]
    source: str = "<memory>"
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        counts = {t: sum(1 for op in self.operations if op.type == t) for t in OP_TYPES[1:]}
        return (
            f"{self.source}: {len(self.events)} events, {len(self.operations)} operations "
            f"({counts['ok']} ok, {counts['fail']} fail, {counts['info']} info), "
            f"{len(self.watch_events)} watch events"
        )


def decode_bytes(value: Any, where: str = "value") -> bytes:
    """A key or value from a history: a string (UTF-8) or {"b64": "..."}."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except binascii.Error as error:
            raise ValueError(f"{where}: invalid base64 ({error})") from error
    raise ValueError(f"{where}: expected a string or {{'b64': ...}}, got {value!r}")


def encode_bytes(data: bytes) -> str | dict[str, str]:
    """Bytes as a history writes them: a string if UTF-8, else {"b64": "..."}."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


@cache
def load_schema() -> dict[str, Any]:
    """The versioned JSON Schema of one history line (checker/history.schema.json)."""
    text = resources.files("etcdspec.checker").joinpath("history.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_ok(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES[name])


def schema_errors(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The subset of JSON Schema the history schema uses: type, enum, required,
    properties, additionalProperties (false), minimum, minLength, oneOf."""
    errors: list[str] = []
    where = path or "the line"
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, name) for name in names):
            return [f"{where} must be of type {' or '.join(names)}, got {json.dumps(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        errors.append(f"{where} must be one of {allowed}, got {json.dumps(value)}")
    if "minimum" in schema and isinstance(value, int) and value < schema["minimum"]:
        errors.append(f"{where} must be >= {schema['minimum']}, got {value}")
    if "minLength" in schema and isinstance(value, str) and len(value) < schema["minLength"]:
        errors.append(f"{where} must not be empty")
    if "oneOf" in schema:
        matches = sum(1 for option in schema["oneOf"] if not schema_errors(value, option, path))
        if matches != 1:
            errors.append(f"{where} matches {matches} of the allowed forms, expected exactly 1")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f'missing required field "{name}"')
        properties = schema.get("properties", {})
        for name, item in value.items():
            if name in properties:
                errors.extend(schema_errors(item, properties[name], f'field "{name}"'))
            elif schema.get("additionalProperties") is False:
                errors.append(f'unknown field "{name}" (allowed: {", ".join(properties)})')
    return errors


_REQUIRED = frozenset({"index", "process", "type", "f", "time"})
_ALLOWED = _REQUIRED | {"value", "error", "schema_version", "user"}
_EVENT_TYPE_SET = frozenset(EVENT_TYPES)
_EVENT_DEFAULTS: dict[str, Any] = {"value": None, "error": None, "user": None}


def _plainly_valid(obj: Any) -> bool:
    """A fast check that accepts only lines the schema accepts (the common case: no
    schema_version, which takes the full walk)."""
    if type(obj) is not dict or "schema_version" in obj or not obj.keys() <= _ALLOWED:
        return False
    get = obj.get
    index, process, kind, f, time = get("index"), get("process"), get("type"), get("f"), get("time")
    return (
        type(index) is int
        and index >= 0
        and type(time) is int
        and time >= 0
        and (type(process) is int or type(process) is str)
        and type(kind) is str
        and kind in _EVENT_TYPE_SET
        and type(f) is str
        and f != ""
        and type(get("user", "")) is str
    )


def parse_event(obj: Any, source: str = "<memory>", line: int = 0) -> HistoryEvent:
    """One decoded JSON line, validated against the schema, as a HistoryEvent."""
    if not _plainly_valid(obj):  # the full schema walk only when something is off
        errors = schema_errors(obj, load_schema())
        if errors:
            raise HistoryError(source, line, "; ".join(errors))
    version = obj.get("schema_version", SCHEMA_VERSION)
    if version > SCHEMA_VERSION:
        raise HistoryError(
            source,
            line,
            f"schema_version {version} is newer than this checker reads ({SCHEMA_VERSION}); "
            "upgrade etcdspec",
        )
    return HistoryEvent(
        index=obj["index"],
        process=obj["process"],
        type=obj["type"],
        f=obj["f"],
        value=obj.get("value"),
        time=obj["time"],
        line=line,
        error=obj.get("error"),
        user=obj.get("user"),
    )


def read_history(path: Path | str) -> History:
    """Read and validate a JSON Lines history file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as error:
        raise HistoryError(str(path), 0, "no such file") from error
    except OSError as error:
        raise HistoryError(str(path), 0, f"cannot read ({error.strerror})") from error
    if data.isascii() and not any(mark in data for mark in _STR_ONLY_BREAKS):
        # The lines of ASCII text without those marks are the same bytes or str (split
        # at \n, \r and \r\n), and orjson reads bytes as it reads their str: read as
        # bytes, with no decoded copy of the whole file (40 MB at 100k operations) and
        # no encoded one for `long_digit_run`. A line orjson refuses is decoded and read
        # as `parse_history_text` reads it.
        return _history_of_lines(data.splitlines(), data, str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HistoryError(str(path), 0, f"not UTF-8 text ({error.reason})") from error
    return parse_history_text(text, source=str(path))


# ASCII characters at which str.splitlines splits a line and bytes.splitlines does not.
_STR_ONLY_BREAKS = (b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")


def parse_history_text(text: str, source: str = "<memory>") -> History:
    """Parse JSON Lines text into a validated History."""
    return _history_of_lines(text.splitlines(), text, source)


def _history_of_lines(lines: Sequence[str | bytes], whole: str | bytes, source: str) -> History:
    """The validated History of `lines`, the lines of `whole` (str, or ASCII bytes).
    The C loop (`_read_plain`) reads them when every line is plainly valid and paired
    (most files); it declines anything else, and `_parse_lines` reads them all."""
    fast = _orjson_loads if _FAST_JSON else None
    with paused_gc():
        compiled = _read_plain if _COMPILED_READ else None
        if compiled is not None and fast is not None and type(lines) is list:
            # It looks for long digit runs line by line itself (no copy of the whole text)
            read = compiled(
                lines, fast, _exact_loads, _PLAIN_KEYS, _EVENT_TYPE_SET, HistoryEvent, LONG_DIGITS
            )
            if read is not None:
                pairing = _Pairing()
                events, pairing.fields, pairing.open_ops, pairing.watch, pairing.count = read
                return _assembled_history(events, pairing, source)
        per_line = fast is not None and long_digit_run(whole)  # else no line has one
        events, paired = _parse_lines(lines, whole, source, per_line)
        if paired is None:  # something to say about the order: build_history says it
            return build_history(events, source)
        return _assembled_history(events, paired, source)


_DECODE = json.JSONDecoder().raw_decode
# Digits to "0", everything else kept: a run of LONG_DIGITS zeros after it is a run of
# that many digits before.
_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
# orjson reads an integer beyond 64 bits as a float (-9999999999999999999, 19 digits,
# already), where the stdlib keeps an int; a line with a run of this many digits (etcd's
# 19-digit lease ids, say) is read by the stdlib.
LONG_DIGITS = 19
_FAST_JSON = True  # use orjson when it is installed (tests switch it off)
_PLAIN_KEYS = _ALLOWED - {"schema_version"}  # a line with schema_version takes the walk
_PROCESS_TYPES = (int, str)


def long_digit_run(text: str | bytes) -> bool:
    """Whether `text` holds a run of LONG_DIGITS digits."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return b"0" * LONG_DIGITS in data.translate(_DIGITS_TO_ZERO)


_SLOT = 11  # values per operation in `_Pairing.fields`


class _Pairing:
    """`build_history`'s pairing of invokes and completions, done by `_parse_lines`
    while it reads the lines (one pass over the events: no pairs list to sort, no second
    walk over the events). An invoke takes the next operation id (ids follow the
    invokes' order, as `build_history`'s sorted pairs give them) and a slot in
    `fields` (_SLOT values each), filled with what its operation is made of when it
    completes; `_assembled_history` makes the operations, all together (never completed:
    info, with a note). It only records: at the first event that breaks a rule
    `broken` is set, and the caller hands the events to `build_history`, which raises
    the error it always raised."""

    __slots__ = ("broken", "count", "fields", "open_ops", "watch")

    def __init__(self) -> None:
        # process -> (position, f, operation id, the invoke)
        self.open_ops: dict[int | str, tuple[int, str, int, HistoryEvent]] = {}
        # _SLOT values per operation, by id: an ok one's fields in the constructor's
        # order (but id and type); any other's None, start, end, invoke, completion
        # (end and completion None while open). One flat list, not a tuple each: tuples
        # made while reading lie scattered among the events, and once freed their
        # slots would scatter whatever is made next in their size (the prepared items).
        self.fields: list[Any] = []
        self.count = 0
        self.watch: list[HistoryEvent] = []
        self.broken = False


def _exact_loads(raw: str | bytes) -> Any:
    """A line with a long digit run, decoded as `_parse_lines` decodes it when it holds
    one (the stdlib, exactly one value): ValueError when it does not decode so."""
    line = _as_text(raw)
    obj, end = _DECODE(line)
    if end != len(line):
        raise ValueError("trailing text")
    return obj


def _as_text(raw: str | bytes) -> str:
    """A line (or the whole text) as str: ASCII bytes decoded."""
    return raw if isinstance(raw, str) else raw.decode("ascii")


def _parse_lines(
    lines: Sequence[str | bytes], whole: str | bytes, source: str, per_line: bool
) -> tuple[list[HistoryEvent], _Pairing | None]:
    """Every non-blank line of `lines` (of `whole`: str, or ASCII bytes, which a line
    is decoded from where orjson does not read it) as a HistoryEvent, and the events paired into operations
    (None when the order breaks a rule: `build_history` then says which). A plainly
    valid line (the common case: the fields `_plainly_valid` checks, inline) becomes
    its event with the decoded object as the event's fields; anything else takes
    `parse_event`'s full schema walk. A line is decoded by orjson unless it holds a long
    digit run (`long_digit_run`) or orjson refuses it (NaN, a float out of range, an
    escaped lone surrogate, text around the value): then by the stdlib, which decides
    what the line is. The pairing (`_Pairing`, `build_history`'s rules in its order)
    is inline: it runs once per line."""
    events: list[HistoryEvent] = []
    append = events.append
    pairing = _Pairing()
    open_ops, fields, watch = pairing.open_ops, pairing.fields, pairing.watch
    add_fields = fields.extend
    count = 0
    crashed: set[int | str] = set()
    last_index = last_time = -1
    paired = True  # no rule broken so far
    fast = _orjson_loads if _FAST_JSON else None
    # per_line: whether a line may hold a long digit run (`long_digit_run` of `whole`)
    plain_keys, event_types, process_types = _PLAIN_KEYS, _EVENT_TYPE_SET, _PROCESS_TYPES
    new_object, set_attribute = _new_object, _set_attribute
    index: Any
    time: Any
    process: Any
    kind: Any
    f: Any
    for number, raw in enumerate(lines, start=1):
        try:
            if fast is not None and not (per_line and long_digit_run(raw)):
                obj = fast(raw)
            else:
                line = _as_text(raw)
                obj, end = _DECODE(line)
                if end != len(line):
                    raise ValueError("trailing text")
        except ValueError:
            line = _as_text(raw)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as error:
                edn = _looks_like_edn(_as_text(whole))
                hint = "; it reads as Jepsen EDN: pass --format edn" if edn else ""
                raise HistoryError(
                    source, number, f"not valid JSON ({error.msg} at column {error.colno}){hint}"
                ) from error
        event: Any = None
        if type(obj) is dict and obj.keys() <= plain_keys:  # _plainly_valid, inline
            get = obj.get
            index, time, process, kind, f = (
                get("index"),
                get("time"),
                get("process"),
                get("type"),
                get("f"),
            )
            if (
                type(index) is int
                and index >= 0
                and type(time) is int
                and time >= 0
                and type(process) in process_types
                and type(kind) is str
                and kind in event_types
                and type(f) is str
                and f != ""
                and type(get("user", "")) is str
            ):
                # The decoded object is the event's fields (no key but the fields).
                obj["line"] = number
                if "value" not in obj:
                    obj["value"] = None
                if "error" not in obj:
                    obj["error"] = None
                if "user" not in obj:
                    obj["user"] = None
                event = new_object(HistoryEvent)
                set_attribute(event, "__dict__", obj)
        if event is None:
            event = parse_event(obj, source, number)
            index, time, process, kind, f = (
                event.index,
                event.time,
                event.process,
                event.type,
                event.f,
            )
        position = len(events)
        append(event)
        if not paired:
            continue
        # build_history's rules, in its order.
        if index <= last_index or time < last_time:
            paired = False
            continue
        last_index, last_time = index, time
        if kind == "invoke":
            if process in open_ops or process in crashed:
                paired = False
                continue
            open_ops[process] = (position, f, count, event)
            add_fields((None, position, None, event, None, None, None, None, None, None, None))
            count += 1
            continue
        if kind == "watch":
            watch.append(event)
            continue
        begun = open_ops.pop(process, None)
        if begun is None or begun[1] != f:
            paired = False
            continue
        start, _, op_id, invoke = begun
        if kind == "info":
            crashed.add(process)
        # Made in a second pass (`_assembled_history`), all together: operations made
        # here would lie scattered among the events in memory, and every later pass
        # over them (prepare, the search's tables) would pay for it in cache misses.
        base = op_id * _SLOT
        if kind == "ok":  # its fields, read while the two events are in the cache
            fields[base : base + _SLOT] = (
                invoke.process,
                f,
                invoke.value,
                event.value,
                start,
                position,
                invoke.time,
                time,
                invoke.index,
                index,
                invoke.user,
            )
        else:
            fields[base + 2] = position
            fields[base + 4] = event
    pairing.count = count
    pairing.broken = not paired
    assert paired is False or len(fields) == count * _SLOT
    return events, None if pairing.broken else pairing


def _looks_like_edn(text: str) -> bool:
    """Whether text that is not JSON reads like Jepsen's EDN: among its first lines, a
    `;` comment or a map with keywords (`{:type :invoke, :f :read ...}`)."""
    for line in text.splitlines()[:20]:
        stripped = line.lstrip()
        if stripped.startswith(";") or re.match(r"[{\[]\s*:[A-Za-z]", stripped):
            return True
    return False


def build_history(events: Sequence[HistoryEvent], source: str = "<memory>") -> History:
    """Pair events into operations, rejecting a history that breaks its own assumptions."""
    open_ops: dict[int | str, int] = {}  # process -> position of its open invoke
    crashed: dict[int | str, int] = {}  # process -> line of its info completion
    pairs: list[tuple[int, int | None]] = []
    watch: list[HistoryEvent] = []
    last_index = -1
    last_time = -1
    for position, event in enumerate(events):
        index, time = event.index, event.time
        if index <= last_index:
            raise HistoryError(
                source,
                event.line,
                f"index {index} does not increase (previous {last_index}); "
                "events must be in the order they happened",
            )
        if time < last_time:
            raise HistoryError(
                source,
                event.line,
                f"time {time} goes backwards (previous {last_time}); "
                "time must be a monotonic clock",
            )
        last_index, last_time = index, time
        kind = event.type
        if kind == "watch":
            watch.append(event)
            continue
        process = event.process
        if kind == "invoke":
            if process in open_ops:
                other = events[open_ops[process]]
                raise HistoryError(
                    source,
                    event.line,
                    f"process {process} invokes {event.f} while its {other.f} from line "
                    f"{other.line} is still open; a process runs one operation at a time",
                )
            if crashed and process in crashed:
                raise HistoryError(
                    source,
                    event.line,
                    f"process {process} invokes again after its info on line "
                    f"{crashed[process]}; after info a process must not invoke again "
                    "(use a new process id, as Jepsen does)",
                )
            open_ops[process] = position
            continue
        start = open_ops.pop(process, None)
        if start is None:
            raise HistoryError(
                source,
                event.line,
                f"process {process} completes {event.f} ({kind}) with no open "
                "invoke: a return before its call",
            )
        invoke = events[start]
        if invoke.f != event.f:
            raise HistoryError(
                source,
                event.line,
                f"process {process} completes {event.f} but invoked {invoke.f} "
                f"on line {invoke.line}",
            )
        if kind == "info":
            crashed[process] = event.line
        pairs.append((start, position))
    return _history_from_pairs(events, pairs, open_ops, watch, source)


def _assembled_history(events: list[HistoryEvent], paired: _Pairing, source: str) -> History:
    """The History of events `_parse_lines` paired as it read them: each operation built
    from its invoke and completion (`paired.fields`, by id), the invokes never
    completed as info operations with a note each (as `_history_from_pairs`)."""
    notes: list[str] = []
    for process, (_, f, _, invoke) in paired.open_ops.items():
        notes.append(
            f"process {process}: {f} on line {invoke.line} never "
            "completed; treated as info (it may or may not have taken effect)"
        )
    if _assemble is not None and _COMPILED_READ:  # this loop, in C
        built: list[Operation] = _assemble(paired.fields, Operation, _operation_of)
        return History(tuple(events), tuple(built), tuple(paired.watch), source, tuple(notes))
    operations: list[Operation] = []
    append, new_object, set_attribute = operations.append, _new_object, _set_attribute
    each = iter(paired.fields)
    # zip hands back its one tuple when it is free again: no tuple per operation.
    for op_id, slot in enumerate(zip(*(each,) * _SLOT, strict=False)):
        if slot[0] is None:  # not ok
            _, start, end, invoke, complete = slot[:5]
            append(_operation_of(op_id, invoke, start, complete, end))
            continue
        process, f, request, response, start, end, call_time, return_time, called, done, user = slot
        # `_operation` of an ok one, inline, field by field in the constructor's order
        # (see `_history_from_pairs`).
        made = new_object(Operation)
        set_attribute(made, "id", op_id)
        set_attribute(made, "process", process)
        set_attribute(made, "f", f)
        set_attribute(made, "request", request)
        set_attribute(made, "type", "ok")
        set_attribute(made, "response", response)
        set_attribute(made, "call", start)
        set_attribute(made, "ret", end)
        set_attribute(made, "call_time", call_time)
        set_attribute(made, "return_time", return_time)
        set_attribute(made, "invoke_index", called)
        set_attribute(made, "complete_index", done)
        set_attribute(made, "user", user)
        append(made)
    return History(tuple(events), tuple(operations), tuple(paired.watch), source, tuple(notes))


def _history_from_pairs(
    events: Sequence[HistoryEvent],
    pairs: list[tuple[int, int | None]],
    open_ops: dict[int | str, int],
    watch: list[HistoryEvent],
    source: str,
) -> History:
    """The History of events paired into `pairs` (invoke and completion positions), the
    invokes in `open_ops` never completed (they become info, with a note)."""
    notes: list[str] = []
    for process, start in open_ops.items():
        pairs.append((start, None))
        notes.append(
            f"process {process}: {events[start].f} on line {events[start].line} never "
            "completed; treated as info (it may or may not have taken effect)"
        )
    pairs.sort()
    operations: list[Operation] = []
    append, new_operation, set_attribute = operations.append, _new_object, _set_attribute
    for op_id, (start, end) in enumerate(pairs):
        invoke = events[start]
        complete = events[end] if end is not None else None
        if complete is None or complete.type != "ok":  # `_operation`, the common case inline
            append(_operation(op_id, events, start, end))
            continue
        # Field by field, in the constructor's order: the values then live in the
        # object itself (CPython 3.11's inline attribute values), with no dict of their
        # own, about 340 bytes less per operation than a __dict__ set at once; reading
        # them back is faster too. (What the constructor does, without its frozen
        # __setattr__ hook.)
        made = new_operation(Operation)
        set_attribute(made, "id", op_id)
        set_attribute(made, "process", invoke.process)
        set_attribute(made, "f", invoke.f)
        set_attribute(made, "request", invoke.value)
        set_attribute(made, "type", "ok")
        set_attribute(made, "response", complete.value)
        set_attribute(made, "call", start)
        set_attribute(made, "ret", end)
        set_attribute(made, "call_time", invoke.time)
        set_attribute(made, "return_time", complete.time)
        set_attribute(made, "invoke_index", invoke.index)
        set_attribute(made, "complete_index", complete.index)
        set_attribute(made, "user", invoke.user)
        append(made)
    return History(tuple(events), tuple(operations), tuple(watch), source, tuple(notes))


def _operation(
    op_id: int, events: Sequence[HistoryEvent], start: int, end: int | None
) -> Operation:
    return _operation_of(op_id, events[start], start, events[end] if end is not None else None, end)


def _operation_of(
    op_id: int,
    invoke: HistoryEvent,
    start: int,
    complete: HistoryEvent | None,
    end: int | None,
) -> Operation:
    """The operation of `invoke` (at position `start`) and `complete` (at `end`; None:
    never completed)."""
    if complete is None or complete.type == "info":
        kind, response, ret, return_time = "info", None, None, None
        if complete is not None:
            response = complete.value
    else:
        kind, response, ret, return_time = complete.type, complete.value, end, complete.time
        if kind == "fail" and complete.error is not None and response is None:
            response = {"error": complete.error}
    return assembled(
        Operation,
        {
            "id": op_id,
            "process": invoke.process,
            "f": invoke.f,
            "request": invoke.value,
            "type": kind,
            "response": response,
            "call": start,
            "ret": ret,
            "call_time": invoke.time,
            "return_time": return_time,
            "invoke_index": invoke.index,
            "complete_index": complete.index if complete is not None else None,
            "user": invoke.user,
        },
    )


def event_line(event: HistoryEvent) -> str:
    """The canonical JSON text of one event (fixed field order, compact, UTF-8)."""
    obj = event.to_json()
    ordered = {name: obj[name] for name in _FIELD_ORDER if name in obj}
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))


def write_history(events: Iterable[HistoryEvent], out: IO[str] | Path | str) -> None:
    """Write events as JSON Lines (the reader reads back exactly these events)."""
    if isinstance(out, (str, Path)):
        with Path(out).open("w", encoding="utf-8") as handle:
            write_history(events, handle)
        return
    for event in events:
        out.write(event_line(event) + "\n")


class HistoryBuilder:
    """Records a history in memory, numbering events and keeping time monotonic.

    Used by workloads and by tests that generate histories from the model.
    """

    def __init__(self) -> None:
        self.events: list[HistoryEvent] = []
        self._time = 0

    def add(
        self,
        process: int | str,
        type_: str,
        f: str,
        value: Any = None,
        time: int | None = None,
        error: Any = None,
        user: str | None = None,
    ) -> HistoryEvent:
        if time is None:
            time = self._time + 1
        self._time = max(self._time, time)
        event = HistoryEvent(
            len(self.events), process, type_, f, value, time, error=error, user=user
        )
        self.events.append(event)
        return event

    def history(self, source: str = "<generated>") -> History:
        return build_history(self.events, source)

    def __iter__(self) -> Iterator[HistoryEvent]:
        return iter(self.events)
