"""Traces of a 3-member cluster show the Ready contract held: nothing is acknowledged or
replicated before it is on disk.

Each member runs with --trace. For every member, in trace order: a MsgAppResp it sends
acknowledges only an index it has persisted (the "ack before fsync" bug breaks exactly
this), and a MsgApp it sends carries only entries it has persisted, except the leader's
own new entries (of its term, which it holds), which leave while its fsync runs (the
leader's parallel persist, impl/member.py `leader_sends_early`). Witnesses check that
entries were replicated and acknowledged at all, and that the leader did send ahead.
"""

from __future__ import annotations

import json
from pathlib import Path

import etcd_procs
import grpc
from etcdspec.impl import launcher
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


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
