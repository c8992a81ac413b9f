"""A member serves no client request until its own publish is applied, as etcd 3.5.1's:
the same script against ours and etcd, side by side, the same answers.

etcd listens on its client port from the start but serves it only once its server is
ready (its publish, ClusterMemberAttrSet, applied): until then a client's TCP connection
completes (in the kernel's backlog) but no gRPC call and no HTTP request is answered, so
every call ends at the caller's own deadline (DEADLINE_EXCEEDED), Status and a
serializable Range included; the metrics port answers at once (/metrics, and /health
503). The script: m1 of a 3-member cluster starts alone (no quorum, so no publish can be
applied); every kind of call is asked of it with a short deadline; then m2 starts, and
m1 answers Status (asked again until it does), a Put, MemberList and /health.
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import etcd_procs
import grpc

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])
SHORT_DEADLINE_S = 0.5  # a call asked of a member that is not ready waits this long
DEADLINE_S = 30.0


def _watch(channel: grpc.Channel, timeout: float) -> Any:
    create = rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(key=b"k"))
    stream = rpc_pb2_grpc.WatchStub(channel).Watch(iter([create]), timeout=timeout)
    try:
        return next(stream)
    finally:
        stream.cancel()


CALLS: dict[str, Callable[[grpc.Channel, float], Any]] = {
    "Status": lambda ch, t: rpc_pb2_grpc.MaintenanceStub(ch).Status(
        rpc_pb2.StatusRequest(), timeout=t
    ),
    "serializable Range": lambda ch, t: rpc_pb2_grpc.KVStub(ch).Range(
        rpc_pb2.RangeRequest(key=b"k", serializable=True), timeout=t
    ),
    "Put": lambda ch, t: rpc_pb2_grpc.KVStub(ch).Put(
        rpc_pb2.PutRequest(key=b"k", value=b"v"), timeout=t
    ),
    "MemberList": lambda ch, t: rpc_pb2_grpc.ClusterStub(ch).MemberList(
        rpc_pb2.MemberListRequest(), timeout=t
    ),
    "LeaseGrant": lambda ch, t: rpc_pb2_grpc.LeaseStub(ch).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=30), timeout=t
    ),
    "Alarm": lambda ch, t: rpc_pb2_grpc.MaintenanceStub(ch).Alarm(
        rpc_pb2.AlarmRequest(), timeout=t
    ),
    "Watch": _watch,
}


def _call(endpoint: str, name: str, timeout: float) -> str:
    """One call: "answered", or the gRPC code it ended with."""
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        try:
            CALLS[name](channel, timeout)
        except grpc.RpcError as error:
            return str(error.code().name)
    return "answered"


def _http(url: str, timeout: float) -> str:
    """GET `url`: its status, or "no answer" when none came within `timeout`."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return str(answer.status)
    except urllib.error.HTTPError as error:
        return str(error.code)
    except (TimeoutError, urllib.error.URLError) as error:
        reason = getattr(error, "reason", error)
        return "no answer" if isinstance(reason, TimeoutError) else f"error {reason}"


def _wait_listening(port: int) -> None:
    """Until a TCP connection to the client port completes (with a deadline)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on port {port}") from None
            time.sleep(0.05)


def _run(kind: str, directory: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    plan = launcher.plan_cluster(directory, 3, heartbeat_ms=50, election_ms=500)
    m1, m2 = plan.members[0], plan.members[1]
    program = etcd_procs.program_for(kind)
    running: list[launcher.RunningMember] = []
    try:
        running.append(launcher.start_member(plan, m1, program))
        _wait_listening(m1.client_port)
        with ThreadPoolExecutor(len(CALLS) + 2) as pool:  # all at once: each waits
            calls = {
                name: pool.submit(_call, m1.client_url, name, SHORT_DEADLINE_S) for name in CALLS
            }
            health = pool.submit(_http, f"{m1.client_url}/health", SHORT_DEADLINE_S)
            version = pool.submit(_http, f"{m1.client_url}/version", SHORT_DEADLINE_S)
            seen["alone"] = {name: future.result() for name, future in calls.items()}
            seen["alone /health"] = health.result()
            seen["alone /version"] = version.result()
        seen["alone metrics /health"] = _http(f"{m1.metrics_url}/health", 5.0)
        seen["alone metrics /metrics"] = _http(f"{m1.metrics_url}/metrics", 5.0)
        running.append(launcher.start_member(plan, m2, program))
        deadline = time.monotonic() + DEADLINE_S
        while _call(m1.client_url, "Status", 1.0) != "answered":
            assert time.monotonic() < deadline, f"{kind}: m1 never answered Status"
        seen["with m2"] = {name: _call(m1.client_url, name, 5.0) for name in ("Put", "MemberList")}
        seen["with m2 /health"] = _http(f"{m1.client_url}/health", 5.0)
    finally:
        launcher.stop_members(running)
    return seen


def test_a_member_answers_no_client_until_its_publish_is_applied_as_etcd(
    tmp_path: Path,
) -> None:
    with ThreadPoolExecutor(len(KINDS)) as pool:
        runs = {kind: pool.submit(_run, kind, tmp_path / kind) for kind in KINDS}
        seen = {kind: future.result() for kind, future in runs.items()}
    alone = {name: "DEADLINE_EXCEEDED" for name in CALLS}
    assert seen["ours"]["alone"] == alone, seen["ours"]
    assert seen["ours"]["alone /health"] == "no answer", seen["ours"]
    assert seen["ours"]["with m2"] == {"Put": "answered", "MemberList": "answered"}
    if "etcd" in seen:
        assert seen["ours"] == seen["etcd"]
