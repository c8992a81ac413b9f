"""The gRPC server serves every etcd method through generic handlers only.

`etcdspec.impl.api.serve.GenericOnly` keeps the generated code's generic handlers and drops
its per-method registrations (which make grpc.aio wait on one pending request per
method for every call). Checked: every method of the seven services we serve has a
handler; none is registered; a real grpc.aio server built this way answers a call of
each streaming kind and UNIMPLEMENTED for a method it does not have, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.api.serve import GenericOnly, add_servicers
from etcdspec.impl.pb import (
    rpc_pb2,
    rpc_pb2_grpc,
    v3election_pb2,
    v3election_pb2_grpc,
    v3lock_pb2,
    v3lock_pb2_grpc,
)
from etcdspec.impl.tools.launcher import free_port

SERVED = (
    ("KV", rpc_pb2_grpc.add_KVServicer_to_server, rpc_pb2_grpc.KVServicer, rpc_pb2),
    ("Watch", rpc_pb2_grpc.add_WatchServicer_to_server, rpc_pb2_grpc.WatchServicer, rpc_pb2),
    ("Lease", rpc_pb2_grpc.add_LeaseServicer_to_server, rpc_pb2_grpc.LeaseServicer, rpc_pb2),
    (
        "Cluster",
        rpc_pb2_grpc.add_ClusterServicer_to_server,
        rpc_pb2_grpc.ClusterServicer,
        rpc_pb2,
    ),
    (
        "Maintenance",
        rpc_pb2_grpc.add_MaintenanceServicer_to_server,
        rpc_pb2_grpc.MaintenanceServicer,
        rpc_pb2,
    ),
    ("Auth", rpc_pb2_grpc.add_AuthServicer_to_server, rpc_pb2_grpc.AuthServicer, rpc_pb2),
    ("Lock", v3lock_pb2_grpc.add_LockServicer_to_server, v3lock_pb2_grpc.LockServicer, v3lock_pb2),
    (
        "Election",
        v3election_pb2_grpc.add_ElectionServicer_to_server,
        v3election_pb2_grpc.ElectionServicer,
        v3election_pb2,
    ),
)


class RecordingServer:
    """Stands in for grpc.aio.Server: records what GenericOnly passes on."""

    def __init__(self) -> None:
        self.generic: list[grpc.GenericRpcHandler] = []
        self.registered: list[str] = []

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.registered.append(service)


class Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


@pytest.mark.parametrize(
    ("service", "add", "servicer", "module"), SERVED, ids=[s[0] for s in SERVED]
)
def test_every_method_has_a_generic_handler_and_none_is_registered(
    service: str, add: Any, servicer: Any, module: Any
) -> None:
    recording = RecordingServer()
    add(servicer(), GenericOnly(recording))
    assert recording.registered == []
    descriptor = module.DESCRIPTOR.services_by_name[service]
    assert descriptor.methods, service
    for method in descriptor.methods:
        path = f"/{descriptor.full_name}/{method.name}"
        found = [h.service(Details(path)) for h in recording.generic]
        assert any(found), f"{path} has no handler"


def test_add_servicers_serves_every_method_of_every_service() -> None:
    """The member's registration (add_servicers) covers each method of SERVED."""
    recording = RecordingServer()
    nothing: Any = None  # the servicers only keep the ports' parts until called
    state: Any = SimpleNamespace(auth=None)  # (the auth store they keep is the state's)
    add_servicers(MemberPorts(state, *[nothing] * 6), recording)
    assert recording.registered == []
    for service, _add, _servicer, module in SERVED:
        descriptor = module.DESCRIPTOR.services_by_name[service]
        for method in descriptor.methods:
            path = f"/{descriptor.full_name}/{method.name}"
            assert any(h.service(Details(path)) for h in recording.generic), path


class SmallKV(rpc_pb2_grpc.KVServicer):
    async def Range(
        self, request: rpc_pb2.RangeRequest, context: grpc.aio.ServicerContext
    ) -> rpc_pb2.RangeResponse:
        return rpc_pb2.RangeResponse(count=len(request.key))


class SmallWatch(rpc_pb2_grpc.WatchServicer):
    async def Watch(
        self,
        request_iterator: AsyncIterator[rpc_pb2.WatchRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[rpc_pb2.WatchResponse]:
        async for request in request_iterator:
            yield rpc_pb2.WatchResponse(watch_id=request.create_request.watch_id, created=True)


def test_a_server_built_with_generic_handlers_answers_unary_and_streams() -> None:
    async def scenario() -> None:
        server = grpc.aio.server()
        handlers = GenericOnly(server)
        rpc_pb2_grpc.add_KVServicer_to_server(SmallKV(), handlers)
        rpc_pb2_grpc.add_WatchServicer_to_server(SmallWatch(), handlers)
        port = free_port()
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                kv = rpc_pb2_grpc.KVStub(channel)
                answer = await kv.Range(rpc_pb2.RangeRequest(key=b"abc"), timeout=5)
                assert answer.count == 3
                with pytest.raises(grpc.aio.AioRpcError) as put_error:
                    await kv.Put(rpc_pb2.PutRequest(key=b"a"), timeout=5)
                assert put_error.value.code() == grpc.StatusCode.UNIMPLEMENTED
                stream = rpc_pb2_grpc.WatchStub(channel).Watch()
                create = rpc_pb2.WatchCreateRequest(key=b"k", watch_id=7)
                await stream.write(rpc_pb2.WatchRequest(create_request=create))
                response = await asyncio.wait_for(stream.read(), 5)
                assert isinstance(response, rpc_pb2.WatchResponse)
                assert (response.watch_id, response.created) == (7, True)
                stream.cancel()
                lease = rpc_pb2_grpc.LeaseStub(channel)
                with pytest.raises(grpc.aio.AioRpcError) as missing:
                    await lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=5), timeout=5)
                assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
        finally:
            await server.stop(grace=None)

    asyncio.run(scenario())
