"""Traces of a 3-member cluster show the Ready contract held: nothing is acknowledged or
replicated before it is on disk.

Each member runs with --trace. For every member, in trace order: a MsgAppResp it sends
acknowledges only an index it has persisted (the "ack before fsync" bug breaks exactly
this), and a MsgApp it sends carries only entries it has persisted, except the leader's
own new entries (of its term, which it holds), which leave while its fsync runs (the
leader's parallel persist, impl/server/pump.py `leader_sends_early`). Witnesses check that
entries were replicated and acknowledged at all, and that the leader did send ahead.
A second test reads the leader's trace for the commit index of a lone write: it reaches
the followers in an MsgApp of its own (the leader's commit timer), not in a heartbeat.
"""

from __future__ import annotations

import json
from pathlib import Path

import etcd_procs
import grpc

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher


def _check_member_trace(lines: list[dict[str, object]]) -> tuple[int, int, int]:
    persisted = 0
    appends = acks = ahead = 0
    for line in lines:
        event = line["event"]
        if event == "start":
            persisted = int(line["last_index"])  # type: ignore[call-overload]
        elif event == "persist":
            entries = line.get("entries") or []
            if entries:
                persisted = int(entries[-1][0])  # type: ignore[index]
        elif event == "send":
            message = line["message"]
            assert isinstance(message, dict)
            if message["type"] == "APP" and message["entries"]:
                appends += 1
                last = message["entries"][-1][0]
                if last > persisted:
                    new = [e for e in message["entries"] if e[0] > persisted]
                    assert line["role"] == "leader", f"sent entry {last} unpersisted: {line}"
                    assert all(e[1] == message["term"] == line["term"] for e in new), line
                    assert last <= line["last_index"], line  # type: ignore[operator]
                    ahead += 1
            if message["type"] == "APP_RESP" and not message["reject"]:
                acks += 1
                assert message["index"] <= persisted, (
                    f"acknowledged {message['index']} unpersisted: {line}"
                )
    return appends, acks, ahead


def test_members_persist_before_they_replicate_or_acknowledge(tmp_path: Path) -> None:
    with etcd_procs.cluster("ours", tmp_path, 3, trace=True) as cluster:
        with grpc.insecure_channel(cluster.endpoints[0].removeprefix("http://")) as channel:
            kv = rpc_pb2_grpc.KVStub(channel)
            for index in range(30):
                kv.Put(rpc_pb2.PutRequest(key=f"t{index}".encode(), value=b"v"), timeout=5)
        launcher.stop_members(cluster.members)  # SIGTERM: traces are flushed and closed
        totals = [0, 0, 0]
        for member in cluster.plan.members:
            path = launcher.trace_path(cluster.plan, member)
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            assert lines and lines[0]["event"] == "start"
            for position, count in enumerate(_check_member_trace(lines)):
                totals[position] += count
        assert min(totals) >= 10, f"too little replication traced (appends, acks, ahead): {totals}"


def test_a_lone_writes_commit_reaches_the_followers_in_an_append_not_a_heartbeat(
    tmp_path: Path,
) -> None:
    """The leader defers the MsgApp that only carries a new commit index (the next write's
    MsgApp may carry it), but not for long: after the last write, a timer sends it
    (impl/server/raft_loop.py COMMIT_FLUSH_S); the followers do not wait for a heartbeat."""
    with etcd_procs.cluster("ours", tmp_path, 3, trace=True) as cluster:
        for endpoint in cluster.endpoints:
            # a member's MemberList waits until its own publish is applied: after this no
            # member proposes its attributes again, so the write is the last entry
            with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
                rpc_pb2_grpc.ClusterStub(channel).MemberList(
                    rpc_pb2.MemberListRequest(), timeout=15
                )
        statuses = [launcher.probe_status(e) for e in cluster.endpoints]
        leader = next(s for s in statuses if s["leader"] == s["member_id"])
        follower = next(s for s in statuses if s is not leader)
        with (
            grpc.insecure_channel(leader["endpoint"].removeprefix("http://")) as writer,
            grpc.insecure_channel(follower["endpoint"].removeprefix("http://")) as watcher,
        ):
            create = rpc_pb2.WatchCreateRequest(key=b"lone", start_revision=0)
            stream = rpc_pb2_grpc.WatchStub(watcher).Watch(
                iter([rpc_pb2.WatchRequest(create_request=create)]), timeout=10
            )
            assert next(stream).created
            rpc_pb2_grpc.KVStub(writer).Put(rpc_pb2.PutRequest(key=b"lone", value=b"v"), timeout=5)
            assert [e.kv.key for e in next(stream).events] == [b"lone"]  # the follower applied
            stream.cancel()
        launcher.stop_members(cluster.members)
        lines = [
            json.loads(line)
            for member in cluster.plan.members
            for line in launcher.trace_path(cluster.plan, member).read_text().splitlines()
        ]
    sends = [
        line["message"]
        for line in lines
        if line["event"] == "send" and line["node"] == leader["member_id"]
    ]
    last = max(e[0] for m in sends if m["type"] == "APP" for e in m["entries"])
    carriers = {
        m["to"] for m in sends if m["type"] == "APP" and not m["entries"] and m["commit"] >= last
    }
    assert carriers == {s["member_id"] for s in statuses if s is not leader}, sends[-6:]
