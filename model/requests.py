"""The store model's vocabulary: requests, responses, key-values and events (etcd v3 API).

Contract: every message is a frozen, hashable dataclass; keys and values are `bytes`;
field names follow etcd's protobufs (etcdserverpb, mvccpb). `describe()` gives the one
canonical text of a message, used by logs, counterexamples and reports, e.g.
`put(a=1, lease 5)`, `range(a..c @rev 3 limit 2)`. Bytes outside printable ASCII are
written as `\\xNN`. A range end of `\\x00` (etcd: "every key >= key") is written `∞`.
Construction checks only types and signs that no etcd server could ever accept; the
semantic checks etcd makes (empty key, duplicate keys in a txn, ...) are `apply()`'s.
"""

from __future__ import annotations

import enum
from dataclasses import MISSING, dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from etcdspec.model.auth_requests import AuthRequest

RANGE_END_ALL = b"\x00"
"""A range end of one zero byte means "every key >= key" (etcd's mkGteRange)."""


def show_bytes(data: bytes) -> str:
    """Printable ASCII as is, anything else (and backslash) as \\xNN; empty as ''."""
    if not data:
        return "''"
    out = []
    for byte in data:
        if 0x21 <= byte <= 0x7E and byte not in (0x5C, 0x27):
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def show_range(key: bytes, range_end: bytes) -> str:
    """`a` for one key, `a..c` for [a, c), `a..∞` for every key >= a."""
    if not range_end:
        return show_bytes(key)
    if range_end == RANGE_END_ALL:
        return f"{show_bytes(key)}..∞"
    return f"{show_bytes(key)}..{show_bytes(range_end)}"


def prefix_end(prefix: bytes) -> bytes:
    """The range end that selects every key starting with `prefix` (clientv3.GetPrefixRangeEnd)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return RANGE_END_ALL


def in_range(key: bytes, start: bytes, range_end: bytes) -> bool:
    """Whether `key` is selected by (start, range_end) as etcd's range reads select keys."""
    if not range_end:
        return key == start
    if range_end == RANGE_END_ALL:
        return key >= start
    return start <= key < range_end


def _check_bytes(owner: str, name: str, value: object) -> None:
    if not isinstance(value, bytes):
        raise TypeError(
            f"{owner}.{name} must be bytes, got {type(value).__name__} {value!r}; "
            f"encode text first, e.g. {value!r}.encode()"
        )


def _check_int(owner: str, name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{owner}.{name} must be an int, got {type(value).__name__} {value!r}")


# ---------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class KeyValue:
    """mvccpb.KeyValue: one key's value at one revision."""

    key: bytes
    create_revision: int
    mod_revision: int
    version: int
    value: bytes = b""
    lease: int = 0

    def describe(self) -> str:
        lease = f" lease {self.lease}" if self.lease else ""
        return (
            f"{show_bytes(self.key)}={show_bytes(self.value)}"
            f"(c{self.create_revision} m{self.mod_revision} v{self.version}{lease})"
        )


class EventType(enum.Enum):
    """mvccpb.Event.EventType."""

    PUT = 0
    DELETE = 1


@dataclass(frozen=True, slots=True)
class Event:
    """mvccpb.Event. A DELETE's kv carries only the key and the deleting mod_revision."""

    type: EventType
    kv: KeyValue
    prev_kv: KeyValue | None = None

    @property
    def revision(self) -> int:
        return self.kv.mod_revision

    def is_create(self) -> bool:
        """clientv3's Event.IsCreate: a PUT whose create_revision is its mod_revision."""
        return self.type is EventType.PUT and self.kv.create_revision == self.kv.mod_revision

    def describe(self) -> str:
        prev = f" prev {self.prev_kv.describe()}" if self.prev_kv is not None else ""
        if self.type is EventType.DELETE:
            return f"DELETE {show_bytes(self.kv.key)}@{self.kv.mod_revision}{prev}"
        return f"PUT {self.kv.describe()}{prev}"


# ---------------------------------------------------------------------------- requests


class SortOrder(enum.Enum):
    """etcdserverpb.RangeRequest.SortOrder."""

    NONE = 0
    ASCEND = 1
    DESCEND = 2


class SortTarget(enum.Enum):
    """etcdserverpb.RangeRequest.SortTarget."""

    KEY = 0
    VERSION = 1
    CREATE = 2
    MOD = 3
    VALUE = 4


@dataclass(frozen=True, slots=True)
class RangeRequest:
    """etcdserverpb.RangeRequest (serializable is a read-path detail, not modelled)."""

    key: bytes
    range_end: bytes = b""
    limit: int = 0
    revision: int = 0
    keys_only: bool = False
    count_only: bool = False
    sort_order: SortOrder = SortOrder.NONE
    sort_target: SortTarget = SortTarget.KEY
    min_mod_revision: int = 0
    max_mod_revision: int = 0
    min_create_revision: int = 0
    max_create_revision: int = 0

    def __post_init__(self) -> None:
        _check_bytes("RangeRequest", "key", self.key)
        _check_bytes("RangeRequest", "range_end", self.range_end)
        _check_int("RangeRequest", "limit", self.limit)
        _check_int("RangeRequest", "revision", self.revision)
        if not isinstance(self.sort_order, SortOrder) or not isinstance(
            self.sort_target, SortTarget
        ):
            raise TypeError(
                f"RangeRequest sort_order/sort_target must be SortOrder/SortTarget, got "
                f"{self.sort_order!r}/{self.sort_target!r}"
            )

    def has_filters(self) -> bool:
        return bool(
            self.min_mod_revision
            or self.max_mod_revision
            or self.min_create_revision
            or self.max_create_revision
        )

    def describe(self) -> str:
        parts = [show_range(self.key, self.range_end)]
        if self.revision:
            parts.append(f"@rev {self.revision}")
        if self.limit:
            parts.append(f"limit {self.limit}")
        if self.keys_only:
            parts.append("keys_only")
        if self.count_only:
            parts.append("count_only")
        if self.sort_order is not SortOrder.NONE or self.sort_target is not SortTarget.KEY:
            parts.append(f"sort {self.sort_target.name.lower()} {self.sort_order.name.lower()}")
        for name in (
            "min_mod_revision",
            "max_mod_revision",
            "min_create_revision",
            "max_create_revision",
        ):
            if getattr(self, name):
                parts.append(f"{name} {getattr(self, name)}")
        return f"range({' '.join(parts)})"


@dataclass(frozen=True, slots=True)
class PutRequest:
    """etcdserverpb.PutRequest."""

    key: bytes
    value: bytes = b""
    lease: int = 0
    prev_kv: bool = False
    ignore_value: bool = False
    ignore_lease: bool = False

    def __post_init__(self) -> None:
        _check_bytes("PutRequest", "key", self.key)
        _check_bytes("PutRequest", "value", self.value)
        _check_int("PutRequest", "lease", self.lease)

    def describe(self) -> str:
        value = "<ignore_value>" if self.ignore_value else show_bytes(self.value)
        text = f"put({show_bytes(self.key)}={value}"
        if self.lease:
            text += f", lease {self.lease}"
        if self.ignore_lease:
            text += ", ignore_lease"
        if self.prev_kv:
            text += ", prev_kv"
        return text + ")"


@dataclass(frozen=True, slots=True)
class DeleteRangeRequest:
    """etcdserverpb.DeleteRangeRequest."""

    key: bytes
    range_end: bytes = b""
    prev_kv: bool = False

    def __post_init__(self) -> None:
        _check_bytes("DeleteRangeRequest", "key", self.key)
        _check_bytes("DeleteRangeRequest", "range_end", self.range_end)

    def describe(self) -> str:
        prev = ", prev_kv" if self.prev_kv else ""
        return f"delete({show_range(self.key, self.range_end)}{prev})"


class CompareTarget(enum.Enum):
    """etcdserverpb.Compare.CompareTarget."""

    VERSION = 0
    CREATE = 1
    MOD = 2
    VALUE = 3
    LEASE = 4


class CompareResult(enum.Enum):
    """etcdserverpb.Compare.CompareResult."""

    EQUAL = 0
    GREATER = 1
    LESS = 2
    NOT_EQUAL = 3


_RESULT_SIGN = {
    CompareResult.EQUAL: "==",
    CompareResult.GREATER: ">",
    CompareResult.LESS: "<",
    CompareResult.NOT_EQUAL: "!=",
}


@dataclass(frozen=True, slots=True)
class Compare:
    """etcdserverpb.Compare: operand is bytes for VALUE, an int for every other target."""

    key: bytes
    target: CompareTarget
    result: CompareResult
    operand: int | bytes
    range_end: bytes = b""

    def __post_init__(self) -> None:
        _check_bytes("Compare", "key", self.key)
        _check_bytes("Compare", "range_end", self.range_end)
        if self.target is CompareTarget.VALUE:
            _check_bytes("Compare", "operand (target VALUE)", self.operand)
        else:
            _check_int("Compare", f"operand (target {self.target.name})", self.operand)

    def describe(self) -> str:
        target = self.target.name.lower()
        operand = self.operand
        shown = show_bytes(operand) if isinstance(operand, bytes) else str(operand)
        where = show_range(self.key, self.range_end)
        return f"{target}({where}) {_RESULT_SIGN[self.result]} {shown}"


@dataclass(frozen=True, slots=True)
class TxnRequest:
    """etcdserverpb.TxnRequest: if every compare holds run success, else failure."""

    compare: tuple[Compare, ...] = ()
    success: tuple[TxnOp, ...] = ()
    failure: tuple[TxnOp, ...] = ()

    def __post_init__(self) -> None:
        for name in ("compare", "success", "failure"):
            if not isinstance(getattr(self, name), tuple):
                raise TypeError(f"TxnRequest.{name} must be a tuple, got {getattr(self, name)!r}")
        for op in self.success + self.failure:
            if not isinstance(op, (RangeRequest, PutRequest, DeleteRangeRequest, TxnRequest)):
                raise TypeError(
                    f"TxnRequest ops must be range, put, delete or txn requests, got {op!r}"
                )

    def describe(self) -> str:
        compare = ", ".join(c.describe() for c in self.compare)
        success = "; ".join(op.describe() for op in self.success)
        failure = "; ".join(op.describe() for op in self.failure)
        return f"txn(if [{compare}] then [{success}] else [{failure}])"

    def is_read_only(self) -> bool:
        return all(_op_is_read_only(op) for op in self.success + self.failure)


TxnOp: TypeAlias = RangeRequest | PutRequest | DeleteRangeRequest | TxnRequest
"""etcdserverpb.RequestOp: what a txn branch may hold."""


def _op_is_read_only(op: TxnOp) -> bool:
    if isinstance(op, RangeRequest):
        return True
    if isinstance(op, TxnRequest):
        return op.is_read_only()
    return False


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """etcdserverpb.CompactionRequest (physical is a durability detail, not modelled)."""

    revision: int

    def __post_init__(self) -> None:
        _check_int("CompactionRequest", "revision", self.revision)

    def describe(self) -> str:
        return f"compact({self.revision})"


@dataclass(frozen=True, slots=True)
class LeaseGrantRequest:
    """etcdserverpb.LeaseGrantRequest: id 0 lets the server choose the id."""

    ttl: int
    id: int = 0

    def __post_init__(self) -> None:
        _check_int("LeaseGrantRequest", "ttl", self.ttl)
        _check_int("LeaseGrantRequest", "id", self.id)  # etcd grants negative ids too

    def describe(self) -> str:
        lease = f"{self.id}" if self.id else "auto"
        return f"lease_grant({lease}, ttl {self.ttl})"


@dataclass(frozen=True, slots=True)
class LeaseRevokeRequest:
    """etcdserverpb.LeaseRevokeRequest; also how expiry enters the store (through the log)."""

    id: int

    def __post_init__(self) -> None:
        _check_int("LeaseRevokeRequest", "id", self.id)

    def describe(self) -> str:
        return f"lease_revoke({self.id})"


@dataclass(frozen=True, slots=True)
class LeaseKeepAliveRequest:
    """etcdserverpb.LeaseKeepAliveRequest: answered by the leader, never in the log."""

    id: int

    def __post_init__(self) -> None:
        _check_int("LeaseKeepAliveRequest", "id", self.id)

    def describe(self) -> str:
        return f"lease_keepalive({self.id})"


@dataclass(frozen=True, slots=True)
class LeaseTimeToLiveRequest:
    """etcdserverpb.LeaseTimeToLiveRequest."""

    id: int
    keys: bool = False

    def __post_init__(self) -> None:
        _check_int("LeaseTimeToLiveRequest", "id", self.id)

    def describe(self) -> str:
        keys = ", keys" if self.keys else ""
        return f"lease_timetolive({self.id}{keys})"


@dataclass(frozen=True, slots=True)
class LeaseLeasesRequest:
    """etcdserverpb.LeaseLeasesRequest."""

    def describe(self) -> str:
        return "lease_leases()"


Request: TypeAlias = (
    RangeRequest
    | PutRequest
    | DeleteRangeRequest
    | TxnRequest
    | CompactionRequest
    | LeaseGrantRequest
    | LeaseRevokeRequest
    | LeaseKeepAliveRequest
    | LeaseTimeToLiveRequest
    | LeaseLeasesRequest
)


@dataclass(frozen=True, slots=True)
class AsUser:
    """A request made by a client: `user` is who its token names ("" for no token) and
    `auth_revision` the auth revision the token was checked at (0: current, never old).

    A request not wrapped in AsUser is the server's own (a lease expiry, a member's
    request): etcd does not check those against any user's permissions, nor does the
    model. Wrapped, it is checked as etcd checks a client's request once auth is enabled
    (model/auth.py).
    """

    user: str
    request: Request | AuthRequest
    auth_revision: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.user, str):
            raise TypeError(f'AsUser.user must be a str ("" for no token), got {self.user!r}')
        if isinstance(self.request, AsUser):
            raise TypeError("AsUser wraps a request, not another AsUser")
        _check_int("AsUser", "auth_revision", self.auth_revision)

    def describe(self) -> str:
        who = self.user or "<no token>"
        at = f"@auth {self.auth_revision}" if self.auth_revision else ""
        return f"[{who}{at}] {self.request.describe()}"


# ---------------------------------------------------------------------------- responses


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    """etcdserverpb.ResponseHeader: the store revision when the request was served."""

    revision: int

    def describe(self) -> str:
        return f"rev {self.revision}"


@dataclass(frozen=True, slots=True)
class RangeResponse:
    """etcdserverpb.RangeResponse: count is every key in range, ignoring limit."""

    header: ResponseHeader
    kvs: tuple[KeyValue, ...] = ()
    more: bool = False
    count: int = 0

    def describe(self) -> str:
        kvs = ", ".join(kv.describe() for kv in self.kvs)
        more = " more" if self.more else ""
        return f"range-> {self.header.describe()} count {self.count}{more} [{kvs}]"


@dataclass(frozen=True, slots=True)
class PutResponse:
    """etcdserverpb.PutResponse."""

    header: ResponseHeader
    prev_kv: KeyValue | None = None

    def describe(self) -> str:
        prev = f" prev {self.prev_kv.describe()}" if self.prev_kv is not None else ""
        return f"put-> {self.header.describe()}{prev}"


@dataclass(frozen=True, slots=True)
class DeleteRangeResponse:
    """etcdserverpb.DeleteRangeResponse: prev_kvs only when the request asked for them."""

    header: ResponseHeader
    deleted: int = 0
    prev_kvs: tuple[KeyValue, ...] = ()

    def describe(self) -> str:
        prev = ""
        if self.prev_kvs:
            prev = " prev [" + ", ".join(kv.describe() for kv in self.prev_kvs) + "]"
        return f"delete-> {self.header.describe()} deleted {self.deleted}{prev}"


@dataclass(frozen=True, slots=True)
class TxnResponse:
    """etcdserverpb.TxnResponse: one response per op of the branch that ran."""

    header: ResponseHeader
    succeeded: bool
    responses: tuple[TxnOpResponse, ...] = ()

    def describe(self) -> str:
        inner = "; ".join(r.describe() for r in self.responses)
        branch = "success" if self.succeeded else "failure"
        return f"txn-> {self.header.describe()} {branch} [{inner}]"


TxnOpResponse: TypeAlias = RangeResponse | PutResponse | DeleteRangeResponse | TxnResponse
"""etcdserverpb.ResponseOp."""


@dataclass(frozen=True, slots=True)
class CompactionResponse:
    header: ResponseHeader

    def describe(self) -> str:
        return f"compact-> {self.header.describe()}"


@dataclass(frozen=True, slots=True)
class LeaseGrantResponse:
    """etcdserverpb.LeaseGrantResponse: ttl is the granted TTL (raised to the minimum)."""

    header: ResponseHeader
    id: int
    ttl: int

    def describe(self) -> str:
        return f"lease_grant-> {self.header.describe()} id {self.id} ttl {self.ttl}"


@dataclass(frozen=True, slots=True)
class LeaseRevokeResponse:
    header: ResponseHeader

    def describe(self) -> str:
        return f"lease_revoke-> {self.header.describe()}"


@dataclass(frozen=True, slots=True)
class LeaseKeepAliveResponse:
    """etcdserverpb.LeaseKeepAliveResponse: ttl 0 means the lease is not found (etcd)."""

    header: ResponseHeader
    id: int
    ttl: int

    def describe(self) -> str:
        return f"lease_keepalive-> {self.header.describe()} id {self.id} ttl {self.ttl}"


@dataclass(frozen=True, slots=True)
class LeaseTimeToLiveResponse:
    """etcdserverpb.LeaseTimeToLiveResponse: ttl -1 means not found (etcd).

    The store has no clock, so `ttl` (remaining) is the granted TTL; the cluster that
    counts ticks may answer with the remaining time instead.
    """

    header: ResponseHeader
    id: int
    ttl: int
    granted_ttl: int = 0
    keys: tuple[bytes, ...] = ()

    def describe(self) -> str:
        keys = ""
        if self.keys:
            keys = " keys [" + ", ".join(show_bytes(k) for k in self.keys) + "]"
        return (
            f"lease_timetolive-> {self.header.describe()} id {self.id} ttl {self.ttl}"
            f" granted {self.granted_ttl}{keys}"
        )


@dataclass(frozen=True, slots=True)
class LeaseLeasesResponse:
    header: ResponseHeader
    leases: tuple[int, ...] = ()

    def describe(self) -> str:
        ids = ", ".join(str(i) for i in self.leases)
        return f"lease_leases-> {self.header.describe()} [{ids}]"


Response: TypeAlias = (
    RangeResponse
    | PutResponse
    | DeleteRangeResponse
    | TxnResponse
    | CompactionResponse
    | LeaseGrantResponse
    | LeaseRevokeResponse
    | LeaseKeepAliveResponse
    | LeaseTimeToLiveResponse
    | LeaseLeasesResponse
)


def is_write(request: Request) -> bool:
    """Whether the request may change the store (and so must go through the Raft log)."""
    if isinstance(request, TxnRequest):
        return not request.is_read_only()
    return not isinstance(
        request, (RangeRequest, LeaseKeepAliveRequest, LeaseTimeToLiveRequest, LeaseLeasesRequest)
    )


def _set_fields_directly(cls: type) -> None:
    """Give the frozen, slotted dataclass `cls` an `__init__` that sets each field
    through its slot's descriptor: what the dataclass's own `__init__` does through
    `object.__setattr__` (same parameters, defaults, annotations and `__post_init__`
    call), at half the cost. The checker builds hundreds of thousands of these messages
    (decoding a history, and the store's answers in its search)."""
    fields = cls.__dataclass_fields__  # type: ignore[attr-defined]
    namespace: dict[str, object] = dict(globals())
    parameters, body = [], []
    for name, spec in fields.items():
        if spec.default_factory is not MISSING or not spec.init or spec.kw_only:
            raise TypeError(f"{cls.__name__}.{name}: only plain fields are set directly")
        namespace[f"_set_{name}"] = getattr(cls, name).__set__
        if spec.default is not MISSING:
            namespace[f"_default_{name}"] = spec.default
            parameters.append(f"{name}=_default_{name}")
        else:
            parameters.append(name)
        body.append(f"    _set_{name}(self, {name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    if not body:
        body.append("    pass")
    source = "\n".join([f"def __init__({', '.join(['self', *parameters])}):", *body, ""])
    exec(compile(source, f"<fast init {cls.__name__}>", "exec"), namespace)
    init = namespace["__init__"]
    original = cls.__init__  # type: ignore[misc]
    init.__qualname__ = original.__qualname__  # type: ignore[attr-defined]
    init.__annotations__ = original.__annotations__
    init.__doc__ = original.__doc__
    cls.__init__ = init  # type: ignore[misc]


for _message in list(globals().values()):
    if (
        isinstance(_message, type)
        and _message.__module__ == __name__
        and "__dataclass_fields__" in _message.__dict__
    ):
        _set_fields_directly(_message)
