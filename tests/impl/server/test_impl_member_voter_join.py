"""A voter added straight (MemberAdd without is_learner) to a cluster whose log already
holds configuration changes, and the strict reconfiguration check's "unhealthy
cluster" for a removal: ours and etcd 3.5.1 side by side, the same answers.

The script, on 3 members whose voters have been connected for etcd's 5 s: one follower
stops; removing the other follower, or the leader, is refused (a quorum of the voters
would not stay connected: UNAVAILABLE "etcdserver: unhealthy cluster"); the stopped one
is removed (a member that is down is safe to remove); a learner that never starts is
added and removed; then a voter is added and started on a fresh data directory, and
every member lists the same members and takes a write.

The new voter receives the whole log, the changes made before it was added included.
Ours checks, from the Raft traces, that its configuration is never one the leader did
not have at the same applied index (and every trace passes trace validation): before it
applies its own addition it keeps the configuration it joined with (as a learner does),
and does not apply the earlier changes again on top of it (it used to: the learner
added before it was, then, in its configuration together with itself).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import etcd_procs
import grpc

from etcdspec.checker.trace_check import check_traces
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher
from etcdspec.verdict import Verdict

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])
# etcd refuses membership changes until every voter has been connected for 5 s.
HEALTH_INTERVAL_S = 5.5
DEADLINE_S = 30.0
UNHEALTHY = "UNAVAILABLE etcdserver: unhealthy cluster"


def _answer(fn: Any) -> str:
    try:
        fn()
    except grpc.RpcError as error:
        return f"{error.code().name} {error.details()}"
    return "ok"


def _listing(endpoint: str, roles: dict[str, str]) -> list[tuple[str, bool, bool]]:
    """A linearizable MemberList at `endpoint`: (role, named, learner), sorted (which
    member is the leader varies, so names are not compared)."""
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        answer = rpc_pb2_grpc.ClusterStub(channel).MemberList(
            rpc_pb2.MemberListRequest(linearizable=True), timeout=10
        )
    return sorted(
        (roles.get(m.peerURLs[0], m.peerURLs[0]), bool(m.name), m.isLearner) for m in answer.members
    )


def _wait(endpoint: str, roles: dict[str, str], done: Any) -> list[tuple[str, bool, bool]]:
    """MemberList at `endpoint`, asked again (with a deadline) until `done(listing)`."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            listing = _listing(endpoint, roles)
        except grpc.RpcError:
            listing = []
        if (listing and done(listing)) or time.monotonic() > deadline:
            return listing
        time.sleep(0.1)


def _script(running: etcd_procs.Cluster) -> tuple[list[tuple[str, Any]], launcher.ClusterPlan]:
    lines: list[tuple[str, Any]] = []
    plan = running.plan
    statuses = {e: launcher.probe_status(e) for e in running.endpoints}
    leader = next(e for e, s in statuses.items() if s["leader"] == s["member_id"])
    first, second = [e for e in running.endpoints if e != leader]
    by_endpoint = {m.client_url: m for m in plan.members}
    roles = {
        by_endpoint[leader].peer_url: "leader",
        by_endpoint[first].peer_url: "follower",
        by_endpoint[second].peer_url: "stopped",
        "http://127.0.0.1:1": "learner",
    }
    ids = {role: statuses[e]["member_id"] for role, e in (("leader", leader), ("follower", first))}
    stopped_id = statuses[second]["member_id"]
    launcher.stop_member(running.member(by_endpoint[second].name))
    time.sleep(1.0)  # the others see its connections close
    with grpc.insecure_channel(leader.removeprefix("http://")) as channel:
        cluster = rpc_pb2_grpc.ClusterStub(channel)

        def remove(ident: int) -> Any:
            return cluster.MemberRemove(rpc_pb2.MemberRemoveRequest(ID=ident), timeout=10)

        def add(url: str, learner: bool) -> Any:
            request = rpc_pb2.MemberAddRequest(peerURLs=[url], isLearner=learner)
            return cluster.MemberAdd(request, timeout=10)

        lines.append(("remove the follower, one down", _answer(lambda: remove(ids["follower"]))))
        lines.append(("remove the leader, one down", _answer(lambda: remove(ids["leader"]))))
        lines.append(("remove the member that is down", _answer(lambda: remove(stopped_id))))
        learner_id = add("http://127.0.0.1:1", True).member.ID
        lines.append(("remove the learner", _answer(lambda: remove(learner_id))))
        remaining = replace(plan, members=tuple(m for m in plan.members if m.client_url != second))
        grown, added = launcher.plan_added_member(remaining, "m4")
        roles[added.peer_url] = "added"
        lines.append(("add a voter", _answer(lambda: add(added.peer_url, False))))
    program = etcd_procs.program_for(running.kind)
    running.members.append(launcher.start_member(grown, added, program, state="existing"))
    endpoints = [leader, first, added.client_url]
    listed = _wait(leader, roles, lambda listing: all(named for _, named, _ in listing))
    lines.append(("listed once it started", listed))
    for role, endpoint in zip(("leader", "follower", "added"), endpoints, strict=True):
        lines.append((f"list at the {role}", _wait(endpoint, roles, lambda x: x == listed)))
        with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
            put = rpc_pb2.PutRequest(key=f"at-{role}".encode(), value=b"v")
            write = rpc_pb2_grpc.KVStub(channel).Put
            lines.append((f"write at the {role}", _answer(partial(write, put, timeout=10))))
    return lines, grown


def _confs(path: Path) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """(applied index, voters, learners) at each trace line where the configuration
    changed, the start's left out."""
    found = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if "conf" in event and event["event"] != "start":
            conf = event["conf"]
            found.append((event["applied"], tuple(conf["voters"]), tuple(conf["learners"])))
    return found


def _run(kind: str, directory: Path) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    extra: dict[str, Any] = {}
    with etcd_procs.cluster(kind, directory, 3, trace=kind == "ours") as running:
        time.sleep(HEALTH_INTERVAL_S)
        lines, plan = _script(running)
        if kind == "ours":
            for member in plan.members:  # the traces are flushed when a member stops
                launcher.stop_member(running.member(member.name))
            extra["traces"] = {m.name: _confs(launcher.trace_path(plan, m)) for m in plan.members}
            everyone = [*running.plan.members, plan.members[-1]]  # the stopped one, the added
            extra["check"] = check_traces([launcher.trace_path(plan, m) for m in everyone])
            # Any of the first members still running: each applied every change.
            extra["leader"] = next(m.name for m in plan.members if m.name != "m4")
    return lines, extra


def test_a_voter_added_after_earlier_changes_joins_as_etcds(tmp_path: Path) -> None:
    with ThreadPoolExecutor(len(KINDS)) as pool:
        runs = {kind: pool.submit(_run, kind, tmp_path / kind) for kind in KINDS}
        seen = {kind: future.result() for kind, future in runs.items()}
    ours, extra = seen["ours"]
    answers = dict(ours)
    assert answers["remove the follower, one down"] == UNHEALTHY, ours
    assert answers["remove the leader, one down"] == UNHEALTHY, ours
    assert answers["add a voter"] == "ok", ours
    assert all(answers[f"write at the {r}"] == "ok" for r in ("leader", "follower", "added"))
    # The added voter's configuration, each time it changed, is the one a first member
    # had at the same applied index.
    first = extra["traces"][extra["leader"]]
    added = extra["traces"]["m4"]
    assert added, "the added member's trace shows no configuration change"
    at_index = {index: (voters, learners) for index, voters, learners in first}
    for index, voters, learners in added:
        expected = max((i for i in at_index if i <= index), default=None)
        assert expected is not None and at_index[expected] == (voters, learners), (
            f"m4 at applied index {index}: voters {voters}, learners {learners}; "
            f"a first member's configurations: {first}"
        )
    # And the traces of every member pass trace validation (the added voter's included).
    assert extra["check"].verdict is Verdict.TRUE, extra["check"].describe()
    if "etcd" in seen:
        assert ours == seen["etcd"][0]
