"""Members' names and client URLs come through the Raft log, as etcd's do (each member
publishes them when it starts), so that every member lists them, a member that is down
included, across restarts: the same script against a 3-member cluster of ours and of
etcd 3.5.1 (the two run side by side), the same answers once ids are masked and URLs
named by the member that owns them.

The script: a learner added with MemberAdd is listed with no name and no client URLs
(MemberList and `etcdctl member list -w json`); once it has started, with both (it
serves no MemberList itself: a learner, it refuses it, as etcd's does); a
snapshot saved then holds etcd's `members` bucket (the names of bootstrap only: etcd
3.5.1 never writes published attributes there); then m3 stops, m1 and m2 restart, and
both list every member, m3 with the name and client URL it published. And a member of
--initial-cluster that never started is listed with the name --initial-cluster gave it
and no client URLs (two of three members started), before and after a restart.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher
from etcdspec.impl.tools.bbolt import BoltFile

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])
DEADLINE_S = 30.0

Listing = list[tuple[str, list[str], list[str], bool]]


def _labels(plan: launcher.ClusterPlan) -> dict[str, str]:
    """Each member's URLs by name: `m1.peer`, `m1.client`."""
    labels = {}
    for member in plan.members:
        labels[member.peer_url] = f"{member.name}.peer"
        labels[member.client_url] = f"{member.name}.client"
    return labels


def _member_list(endpoint: str, labels: dict[str, str]) -> Listing:
    """A linearizable MemberList (what the cluster has applied), URLs labelled, sorted."""
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        answer = rpc_pb2_grpc.ClusterStub(channel).MemberList(
            rpc_pb2.MemberListRequest(linearizable=True), timeout=10
        )
    return sorted(
        (
            m.name,
            [labels.get(u, u) for u in m.peerURLs],
            [labels.get(u, u) for u in m.clientURLs],
            m.isLearner,
        )
        for m in answer.members
    )


def _etcdctl_list(endpoint: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """`etcdctl member list -w json`: its members, ids masked, URLs labelled, sorted."""
    result = etcd_procs.etcdctl([endpoint], "member", "list", "-w", "json")
    assert result.returncode == 0, result.stderr
    members = json.loads(result.stdout)["members"]
    for member in members:
        member["ID"] = "ID"
        for field in ("peerURLs", "clientURLs"):
            if field in member:
                member[field] = [labels.get(u, u) for u in member[field]]
    return sorted(members, key=lambda m: (m.get("name", ""), m["peerURLs"]))


def _members_bucket(path: Path, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The snapshot's `members` bucket: etcd's JSON (field order kept), ids masked."""
    rows = []
    for entry in BoltFile(path.read_bytes(), str(path)).bucket(b"members"):
        assert re.fullmatch(rb"[0-9a-f]{1,16}", entry.key), entry.key
        member = json.loads(entry.value)
        assert int(entry.key, 16) == member.pop("id")
        member["peerURLs"] = [labels.get(u, u) for u in member["peerURLs"]]
        rows.append({"fields": ["id", *member], **member})
    return sorted(rows, key=lambda m: m["peerURLs"])


def _wait_listing(endpoint: str, labels: dict[str, str], done: Any) -> Listing:
    """MemberList, asked again (with a deadline) until `done(listing)`."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            listing = _member_list(endpoint, labels)
        except grpc.RpcError:
            listing = []
        if (listing and done(listing)) or time.monotonic() > deadline:
            return listing
        time.sleep(0.1)


def _named(listing: Listing) -> bool:
    return all(name for name, _, _, _ in listing)


def _run(kind: str, directory: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with etcd_procs.cluster(kind, directory, 3) as running:
        endpoints = running.endpoints
        plan, added = launcher.plan_added_member(running.plan)
        labels = _labels(plan)
        # Retried while etcd's strict reconfiguration check finds the cluster unhealthy
        # (its voters must have been connected for 5 s).
        request = rpc_pb2.MemberAddRequest(peerURLs=[added.peer_url], isLearner=True)
        launcher._cluster_call(endpoints, "MemberAdd", request, DEADLINE_S)
        seen["added"] = _member_list(endpoints[0], labels)
        seen["added etcdctl"] = _etcdctl_list(endpoints[0], labels)
        program = etcd_procs.program_for(kind)
        running.members.append(launcher.start_member(plan, added, program, state="existing"))
        seen["started"] = _wait_listing(endpoints[0], labels, _named)
        try:
            _member_list(added.client_url, labels)
        except grpc.RpcError as error:  # as etcd's: a learner serves no MemberList
            seen["at the learner"] = (error.code().name, error.details())
        saved = directory / "members.db"
        result = etcd_procs.etcdctl(endpoints[:1], "snapshot", "save", str(saved))
        assert result.returncode == 0, result.stderr
        seen["snapshot members"] = _members_bucket(saved, labels)
        for name in ("m3", "m1", "m2"):
            launcher.stop_member(running.member(name))
        for name in ("m1", "m2"):
            running.restart(name)
        launcher.wait_ready(endpoints[:2], timeout_s=DEADLINE_S)
        for endpoint in endpoints[:2]:
            seen[f"restarted, at {labels[endpoint]}"] = _wait_listing(
                endpoint, labels, lambda listing: len(listing) == 4
            )
        seen["restarted etcdctl"] = _etcdctl_list(endpoints[0], labels)
    return seen


def _run_unstarted(kind: str, directory: Path) -> dict[str, Any]:
    """Two of three members of --initial-cluster started, listed; restarted, listed."""
    seen: dict[str, Any] = {}
    plan = launcher.plan_cluster(directory, 3, heartbeat_ms=50, election_ms=500)
    labels = _labels(plan)
    program = etcd_procs.program_for(kind)
    started = [launcher.start_member(plan, m, program, state="new") for m in plan.members[:2]]
    try:
        for stage in ("two started", "two restarted"):
            launcher.wait_ready(plan.endpoints[:2], timeout_s=DEADLINE_S)
            seen[stage] = _wait_listing(
                plan.endpoints[0], labels, lambda listing: sum(bool(m[2]) for m in listing) == 2
            )
            launcher.stop_members(started)
            if stage == "two started":
                started = [
                    launcher.start_member(plan, m, program, state="existing")
                    for m in plan.members[:2]
                ]
    finally:
        launcher.stop_members(started)
    return seen


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    directory = tmp_path_factory.mktemp("member-attributes")
    # Every scenario on both targets at once: they mostly wait (etcd's 5 s health check).
    scenarios = [(kind, run) for kind in KINDS for run in (_run, _run_unstarted)]
    with ThreadPoolExecutor(len(scenarios)) as pool:
        runs = [
            (kind, pool.submit(run, kind, directory / f"{kind}-{run.__name__}"))
            for kind, run in scenarios
        ]
        seen: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        for kind, future in runs:
            seen[kind].update(future.result())
        return seen


FOUR = [
    ("m1", ["m1.peer"], ["m1.client"], False),
    ("m2", ["m2.peer"], ["m2.client"], False),
    ("m3", ["m3.peer"], ["m3.client"], False),
    ("m4", ["m4.peer"], ["m4.client"], True),
]


def test_an_added_member_is_listed_unnamed_until_it_starts_then_named(
    seen: dict[str, dict[str, Any]],
) -> None:
    ours = seen["ours"]
    assert ours["added"] == [("", ["m4.peer"], [], True), *FOUR[:3]]
    assert ours["added etcdctl"][0] == {"ID": "ID", "peerURLs": ["m4.peer"], "isLearner": True}
    assert ours["started"] == FOUR
    assert ours["at the learner"] == ("UNAVAILABLE", "etcdserver: rpc not supported for learner")
    if "etcd" in seen:
        for stage in ("added", "added etcdctl", "started", "at the learner"):
            assert ours[stage] == seen["etcd"][stage], stage


def test_a_snapshot_keeps_etcds_members_bucket_after_names_are_published(
    seen: dict[str, dict[str, Any]],
) -> None:
    ours = seen["ours"]["snapshot members"]
    assert ours == [
        {"fields": ["id", "peerURLs", "name"], "peerURLs": [f"m{i}.peer"], "name": f"m{i}"}
        for i in (1, 2, 3)
    ] + [{"fields": ["id", "peerURLs", "isLearner"], "peerURLs": ["m4.peer"], "isLearner": True}]
    if "etcd" in seen:
        assert ours == seen["etcd"]["snapshot members"]


def test_a_member_that_is_down_keeps_its_name_and_client_urls_across_restarts(
    seen: dict[str, dict[str, Any]],
) -> None:
    ours = seen["ours"]
    assert ours["restarted, at m1.client"] == FOUR
    assert ours["restarted, at m2.client"] == FOUR
    m3 = {"ID": "ID", "name": "m3", "peerURLs": ["m3.peer"], "clientURLs": ["m3.client"]}
    assert m3 in ours["restarted etcdctl"]
    if "etcd" in seen:
        for stage in ("restarted, at m1.client", "restarted, at m2.client", "restarted etcdctl"):
            assert ours[stage] == seen["etcd"][stage], stage


def test_a_member_of_the_initial_cluster_never_started_is_listed_by_its_initial_name(
    seen: dict[str, dict[str, Any]],
) -> None:
    ours = seen["ours"]
    for stage in ("two started", "two restarted"):
        assert ours[stage] == [*FOUR[:2], ("m3", ["m3.peer"], [], False)], stage
        if "etcd" in seen:
            assert ours[stage] == seen["etcd"][stage], stage
