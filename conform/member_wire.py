"""etcd's Cluster service as a client sees it: MemberList, MemberAdd, MemberRemove and
MemberPromote over gRPC, for the membership faults and the membership check.

Contract:
- The request and response messages are built here, in a descriptor pool of their own
  (field names and numbers as in etcd's etcdserverpb rpc.proto; the wire does not carry
  the package name), so this module neither needs nor clashes with the server's
  generated code (etcdspec.impl.pb may or may not declare them).
- `ClusterClient(url)` makes one call per method, with a deadline; every answer is
  turned into `ListedMember` values (id, name, peer and client URLs, learner flag).
- A call the server does not serve (gRPC UNIMPLEMENTED) raises `NotServed` naming the
  method, so a fault can say "target does not serve MemberAdd" and judge the run
  unknown; any other refusal raises `MemberCallError` with etcd's code and text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "etcdspec.conform.member_wire"
_FIELD = descriptor_pb2.FieldDescriptorProto
_UINT64, _INT64, _STRING, _BOOL, _MESSAGE = (
    _FIELD.TYPE_UINT64,
    _FIELD.TYPE_INT64,
    _FIELD.TYPE_STRING,
    _FIELD.TYPE_BOOL,
    _FIELD.TYPE_MESSAGE,
)
_ONE, _MANY = _FIELD.LABEL_OPTIONAL, _FIELD.LABEL_REPEATED

# message name -> (field name, number, type, label, message type name or "")
_MESSAGES: dict[str, tuple[tuple[str, int, int, int, str], ...]] = {
    "ResponseHeader": (
        ("cluster_id", 1, _UINT64, _ONE, ""),
        ("member_id", 2, _UINT64, _ONE, ""),
        ("revision", 3, _INT64, _ONE, ""),
        ("raft_term", 4, _UINT64, _ONE, ""),
    ),
    "Member": (
        ("ID", 1, _UINT64, _ONE, ""),
        ("name", 2, _STRING, _ONE, ""),
        ("peerURLs", 3, _STRING, _MANY, ""),
        ("clientURLs", 4, _STRING, _MANY, ""),
        ("isLearner", 5, _BOOL, _ONE, ""),
    ),
    "MemberAddRequest": (
        ("peerURLs", 1, _STRING, _MANY, ""),
        ("isLearner", 2, _BOOL, _ONE, ""),
    ),
    "MemberAddResponse": (
        ("header", 1, _MESSAGE, _ONE, "ResponseHeader"),
        ("member", 2, _MESSAGE, _ONE, "Member"),
        ("members", 3, _MESSAGE, _MANY, "Member"),
    ),
    "MemberRemoveRequest": (("ID", 1, _UINT64, _ONE, ""),),
    "MemberPromoteRequest": (("ID", 1, _UINT64, _ONE, ""),),
    "MemberListRequest": (("linearizable", 1, _BOOL, _ONE, ""),),
    "MembersResponse": (  # MemberRemove/Promote/ListResponse: the same two fields
        ("header", 1, _MESSAGE, _ONE, "ResponseHeader"),
        ("members", 2, _MESSAGE, _MANY, "Member"),
    ),
}


def _build_classes() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="etcdspec/conform/member_wire.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _MESSAGES
    }


_CLASSES = _build_classes()
_METHODS = {  # method -> (request class, response class)
    "MemberList": ("MemberListRequest", "MembersResponse"),
    "MemberAdd": ("MemberAddRequest", "MemberAddResponse"),
    "MemberRemove": ("MemberRemoveRequest", "MembersResponse"),
    "MemberPromote": ("MemberPromoteRequest", "MembersResponse"),
}


class MemberCallError(RuntimeError):
    """A Cluster call was refused or failed: the method, gRPC code and server's text."""

    def __init__(self, method: str, code: str, details: str) -> None:
        super().__init__(f"{method}: {code} {details}".rstrip())
        self.method = method
        self.code = code
        self.details = details


class NotServed(MemberCallError):
    """The target answered UNIMPLEMENTED: it does not serve this Cluster method."""

    def describe(self) -> str:
        return f"target does not serve {self.method} ({self.code} {self.details})".rstrip()


@dataclass(frozen=True)
class ListedMember:
    """One member as a Cluster answer lists it (name is empty until it has started)."""

    member_id: int
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    is_learner: bool

    def describe(self) -> str:
        role = "learner" if self.is_learner else "voter"
        return f"{self.member_id:x} {self.name or '(unstarted)'} {role} {','.join(self.peer_urls)}"


def _listed(message: Any) -> ListedMember:
    return ListedMember(
        int(message.ID),
        str(message.name),
        tuple(str(url) for url in message.peerURLs),
        tuple(str(url) for url in message.clientURLs),
        bool(message.isLearner),
    )


@dataclass
class ClusterClient:
    """Calls to one member's Cluster service (one channel; `close()` it)."""

    url: str  # http://127.0.0.1:PORT
    timeout_s: float = 5.0
    _channel: grpc.aio.Channel | None = None

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def _call(self, method: str, **fields: Any) -> Any:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.url.removeprefix("http://"))
        request_name, response_name = _METHODS[method]
        call = self._channel.unary_unary(
            f"/etcdserverpb.Cluster/{method}",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=_CLASSES[response_name].FromString,
        )
        try:
            return await call(_CLASSES[request_name](**fields), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as error:
            code, details = error.code(), error.details() or ""
            kind = NotServed if code == grpc.StatusCode.UNIMPLEMENTED else MemberCallError
            raise kind(method, code.name, details) from error

    async def member_list(self) -> tuple[ListedMember, ...]:
        answer = await self._call("MemberList")
        return tuple(_listed(member) for member in answer.members)

    async def member_add(
        self, peer_urls: list[str], is_learner: bool = False
    ) -> tuple[ListedMember, tuple[ListedMember, ...]]:
        """The added member (its id) and the members after the change."""
        answer = await self._call("MemberAdd", peerURLs=peer_urls, isLearner=is_learner)
        return _listed(answer.member), tuple(_listed(member) for member in answer.members)

    async def member_remove(self, member_id: int) -> tuple[ListedMember, ...]:
        answer = await self._call("MemberRemove", ID=member_id)
        return tuple(_listed(member) for member in answer.members)

    async def member_promote(self, member_id: int) -> tuple[ListedMember, ...]:
        answer = await self._call("MemberPromote", ID=member_id)
        return tuple(_listed(member) for member in answer.members)
