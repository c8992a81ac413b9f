"""The gRPC surface under requests generated from the protobuf descriptors
(bench/fuzz_grpc.py): the strategies cover every method of the eight services, a short
slice finds nothing on a running member of ours, and the fuzzer's findings stay fixed.

Regression: AuthUserAdd with a hashedPassword that is not base64 (the fuzzer sent "\\x1f")
reached the apply, whose base64 decode raised, and the raft loop stopped the member — every
member of a cluster, as each applies the entry. etcd 3.5.1 ignores a client's
hashedPassword and hashes `password`; ours now does the same.

Regression: Alarm ACTIVATE of an unknown alarm type (the fuzzer sent 57) was stored, and
every later Status failed (UNKNOWN: the type has no name). etcd 3.5.1 panics applying it
("unimplemented alarm activation") — the whole cluster, at every restart too; ours
refuses it before proposing (INVALID_ARGUMENT), a deliberate difference shown side by side.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from etcd_procs import cluster
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.fuzz import run
from bench.fuzz_grpc import grpc_target, message_strategy, methods
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


def test_every_method_of_the_eight_services_is_fuzzed() -> None:
    services = {method.path.split("/")[1] for method in methods()}
    assert services == {
        "etcdserverpb.KV",
        "etcdserverpb.Watch",
        "etcdserverpb.Lease",
        "etcdserverpb.Cluster",
        "etcdserverpb.Maintenance",
        "etcdserverpb.Auth",
        "v3lockpb.Lock",
        "v3electionpb.Election",
    }
    paths = {method.path for method in methods()}
    # etcd 3.5.1's: KV 5, Watch 1, Lease 5, Cluster 5, Maintenance 7, Auth 17, Lock 2,
    # Election 5.
    assert len(paths) == 47
    assert {"/v3lockpb.Lock/Unlock", "/etcdserverpb.Auth/RoleGrantPermission"} <= paths


@settings(max_examples=10)
@given(st.data())
def test_generated_requests_are_of_their_type_and_serialize(data: st.DataObject) -> None:
    descriptor = rpc_pb2.TxnRequest.DESCRIPTOR
    request = data.draw(message_strategy(descriptor))
    assert request.DESCRIPTOR is descriptor
    assert type(request).FromString(request.SerializeToString()) == request


def _user_add_with_bad_hashes(endpoint: str) -> list[str]:
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        auth = rpc_pb2_grpc.AuthStub(channel)
        said = []
        for name, hashed in (("u1", "\x1f"), ("u2", "!!!"), ("u3", "é")):
            auth.UserAdd(rpc_pb2.AuthUserAddRequest(name=name, hashedPassword=hashed), timeout=10)
            said.append(f"{name} added")
        auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="u4", password="pw"), timeout=10)
        auth.UserChangePassword(
            rpc_pb2.AuthUserChangePasswordRequest(name="u4", password="new", hashedPassword="!!!"),
            timeout=10,
        )
        said.append("u4 changed")
        users = auth.UserList(rpc_pb2.AuthUserListRequest(), timeout=10).users
        status = rpc_pb2_grpc.MaintenanceStub(channel).Status(rpc_pb2.StatusRequest(), timeout=10)
        return [*said, f"users {sorted(users)}", f"leader known {status.leader != 0}"]


@pytest.mark.etcd
def test_a_hashed_password_that_is_not_base64_is_taken_as_etcd_takes_it(tmp_path: Path) -> None:
    answers = {}
    for kind in ("etcd", "ours"):
        with cluster(kind, tmp_path / kind, 1) as running:
            answers[kind] = _user_add_with_bad_hashes(running.endpoints[0])
    assert answers["ours"] == answers["etcd"]
    assert answers["ours"][-1] == "leader known True"


def _raise_alarm(endpoint: str, alarm: int) -> str:
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
        request = rpc_pb2.AlarmRequest(action=rpc_pb2.AlarmRequest.ACTIVATE, alarm=alarm)
        try:
            maintenance.Alarm(request, timeout=10)
            return "raised"
        except grpc.RpcError as error:
            return f"{error.code().name} {error.details()}"


@pytest.mark.etcd
def test_an_unknown_alarm_type_is_refused_where_etcd_panics(tmp_path: Path) -> None:
    with cluster("etcd", tmp_path / "etcd", 1) as etcd:
        _raise_alarm(etcd.endpoints[0], 57)
        member = etcd.members[0]
        assert member.process is not None and member.process.wait(timeout=20) != 0
        assert "unimplemented alarm activation" in etcd.logs()
    with cluster("ours", tmp_path / "ours", 1) as ours:
        said = _raise_alarm(ours.endpoints[0], 57)
        assert said.startswith("INVALID_ARGUMENT etcdserver: only NOSPACE and CORRUPT"), said
        with grpc.insecure_channel(ours.endpoints[0].removeprefix("http://")) as channel:
            maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
            assert maintenance.Status(rpc_pb2.StatusRequest(), timeout=10).leader != 0
        assert _raise_alarm(ours.endpoints[0], rpc_pb2.NOSPACE) == "raised"


def test_a_slice_of_the_grpc_target_finds_nothing() -> None:
    result = run(grpc_target(), 60, seed=2)
    assert result.findings == [], result.findings[:3]
    assert result.inputs == 60 and 0 < result.refused < 60


def _alarm_for_member_beyond_63_bits(endpoint: str) -> list[str]:
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
        said = []
        for action in (rpc_pb2.AlarmRequest.ACTIVATE, rpc_pb2.AlarmRequest.DEACTIVATE):
            request = rpc_pb2.AlarmRequest(action=action, memberID=2**64 - 1, alarm=rpc_pb2.NOSPACE)
            answer = maintenance.Alarm(request, timeout=10)
            said.append(f"{action}: {[(a.memberID, a.alarm) for a in answer.alarms]}")
        listed = maintenance.Alarm(rpc_pb2.AlarmRequest(), timeout=10)
        said.append(f"listed: {list(listed.alarms)}")
        status = maintenance.Status(rpc_pb2.StatusRequest(), timeout=10)
        return [*said, f"leader known {status.leader != 0}"]


@pytest.mark.etcd
def test_an_alarm_for_a_member_id_beyond_63_bits_is_kept_as_etcd_keeps_it(tmp_path: Path) -> None:
    """Found by the grpc target: AlarmRequest ACTIVATE NOSPACE with memberID 2**64 - 1
    raised OverflowError in the apply (SQLite's INTEGER is signed) and stopped the member.
    The same requests to etcd 3.5.1 and to ours get the same answers."""
    answers = {}
    for kind in ("etcd", "ours"):
        with cluster(kind, tmp_path / kind, 1) as running:
            answers[kind] = _alarm_for_member_beyond_63_bits(running.endpoints[0])
    assert answers["ours"] == answers["etcd"]
    assert answers["ours"][0] == f"1: [({2**64 - 1}, 1)]"
    assert answers["ours"][-1] == "leader known True"
