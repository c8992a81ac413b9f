"""etcd's Cluster service on three members, ours and real etcd 3.5.1 side by side: the
same membership calls get the same answers (the members listed, learner flags, etcd's
error codes and texts).

The script covers each check etcd makes: an unknown member (remove, update, promote),
promoting a voter, a peer URL that exists (add, update), bad URLs, MoveLeader to an
unknown member and to a learner, a second learner (too many learners), promoting a
learner that has not caught up (asked of the leader and of a follower, which hands the
call to the leader), and the strict reconfiguration check (a voter added while another
added voter has not started: unhealthy cluster); then a learner updated and removed, a
voter that never started added, and a started voter removed. With auth enabled, only
root changes the membership (a follower hands the call and its token to the leader).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])
# etcd refuses membership changes until every voter has been connected for 5 s.
HEALTH_INTERVAL_S = 5.5


def _members(
    cluster: etcd_procs.Cluster, members: Any, roles: dict[str, str]
) -> list[tuple[str, str, bool]]:
    """(name, peer URL, learner) sorted: a member of the plan by its role in the script
    ("leader", "voter": the follower it removes, "other"), which member plays which
    varies; an added one by the URL it was given."""
    own = {m.peer_url: m.name for m in cluster.plan.members}
    listed = []
    for member in members:
        url = member.peerURLs[0] if member.peerURLs else ""
        if url in own:
            name = url = roles[own[url]]
        else:
            name = member.name
        listed.append((name, url, member.isLearner))
    return sorted(listed)


def _transcript(cluster: etcd_procs.Cluster) -> list[tuple[str, str]]:
    statuses = {e: launcher.probe_status(e) for e in cluster.endpoints}
    leader = next(e for e, s in statuses.items() if s["leader"] == s["member_id"])
    followers = [e for e in cluster.endpoints if e != leader]
    voter = statuses[followers[0]]["member_id"]
    ids = launcher.member_ids(cluster.endpoints)
    role_of = {
        statuses[leader]["member_id"]: "leader",
        voter: "voter",
        statuses[followers[1]]["member_id"]: "other",
    }
    roles = {name: role_of[ident] for name, ident in ids.items()}
    first_peer_url = cluster.plan.members[0].peer_url
    lines: list[tuple[str, str]] = []
    added: dict[str, int] = {}

    with (
        grpc.insecure_channel(leader.removeprefix("http://")) as channel,
        grpc.insecure_channel(followers[0].removeprefix("http://")) as follower_channel,
    ):
        members = rpc_pb2_grpc.ClusterStub(channel)
        on_follower = rpc_pb2_grpc.ClusterStub(follower_channel)
        maintenance = rpc_pb2_grpc.MaintenanceStub(channel)

        def call(name: str, fn: Callable[[], Any]) -> Any:
            try:
                answer = fn()
            except grpc.RpcError as error:
                lines.append((name, f"{error.code().name} {error.details()}"))
                return None
            listed = getattr(answer, "members", None)
            shown = "ok"
            if listed is not None:
                shown += f" members={_members(cluster, listed, roles)}"
            if answer.HasField("header"):
                shown += f" revision={answer.header.revision}"
            member = getattr(answer, "member", None)
            if member is not None:
                shown += f" added={_members(cluster, [member], roles)}"
                added[name] = member.ID
            lines.append((name, shown))
            return answer

        def remove(ident: int) -> Any:
            return members.MemberRemove(rpc_pb2.MemberRemoveRequest(ID=ident), timeout=10)

        def update(ident: int, url: str) -> Any:
            return members.MemberUpdate(
                rpc_pb2.MemberUpdateRequest(ID=ident, peerURLs=[url]), timeout=10
            )

        def add(url: str, learner: bool = False) -> Any:
            return members.MemberAdd(
                rpc_pb2.MemberAddRequest(peerURLs=[url], isLearner=learner), timeout=10
            )

        def promote(stub: Any, ident: int) -> Any:
            return stub.MemberPromote(rpc_pb2.MemberPromoteRequest(ID=ident), timeout=10)

        def move(ident: int) -> Any:
            return maintenance.MoveLeader(rpc_pb2.MoveLeaderRequest(targetID=ident), timeout=10)

        # First, while every follower has all the entries: etcd checks a voter's match
        # as a learner's (so a voter that trails the leader is "not in sync").
        call("promote a voter", lambda: promote(members, voter))
        call("remove unknown", lambda: remove(12345))
        call("update unknown", lambda: update(12345, "http://127.0.0.1:1"))
        call("promote unknown", lambda: promote(members, 12345))
        call("add an existing peer URL", lambda: add(first_peer_url))
        call("add a bad URL", lambda: add("not a url"))
        call("move leader to an unknown member", lambda: move(12345))
        call("add a learner", lambda: add("http://127.0.0.1:1", learner=True))
        learner = added.get("add a learner", 0)
        call(
            "list on a follower",
            lambda: on_follower.MemberList(rpc_pb2.MemberListRequest(linearizable=True)),
        )
        call("add a second learner", lambda: add("http://127.0.0.1:2", learner=True))
        call("promote the learner", lambda: promote(members, learner))
        call("promote the learner on a follower", lambda: promote(on_follower, learner))
        call("move leader to the learner", lambda: move(learner))
        call("update the learner", lambda: update(learner, "http://127.0.0.1:3"))
        call("update to an existing URL", lambda: update(learner, first_peer_url))
        call("remove the learner", lambda: remove(learner))
        call("remove it again", lambda: remove(learner))
        call("add a voter", lambda: add("http://127.0.0.1:4"))
        call("add another voter", lambda: add("http://127.0.0.1:5"))
        call("remove a started voter", lambda: remove(voter))
        call("list", lambda: members.MemberList(rpc_pb2.MemberListRequest()))
    return lines


@pytest.fixture(scope="module")
def transcripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[str, str]]]:
    found = {}
    for kind in KINDS:
        directory: Path = tmp_path_factory.mktemp(f"members-{kind}")
        with etcd_procs.cluster(kind, directory, 3) as running:
            time.sleep(HEALTH_INTERVAL_S)
            found[kind] = _transcript(running)
    return found


def test_membership_calls_answer_as_etcds(transcripts: dict[str, list[tuple[str, str]]]) -> None:
    ours = transcripts["ours"]
    assert (
        "promote a voter",
        "FAILED_PRECONDITION etcdserver: can only promote a learner member",
    ) in ours
    assert ("remove it again", "NOT_FOUND etcdserver: member not found") in ours
    if "etcd" not in transcripts:
        pytest.skip("no etcd binary to compare with")
    for (name, mine), (_, theirs) in zip(ours, transcripts["etcd"], strict=True):
        assert (name, mine) == (name, theirs)


@pytest.mark.parametrize("kind", KINDS)
def test_membership_changes_need_root_when_auth_is_on(kind: str, tmp_path: Path) -> None:
    """With auth enabled, only root changes the membership (asked of a follower, which
    hands the call on with the token); anyone lists the members. Same answers as etcd's."""
    outcomes: list[str] = []
    with etcd_procs.cluster(kind, tmp_path, 3) as cluster:
        time.sleep(HEALTH_INTERVAL_S)
        statuses = {e: launcher.probe_status(e) for e in cluster.endpoints}
        follower = next(e for e, s in statuses.items() if s["leader"] != s["member_id"])
        with grpc.insecure_channel(follower.removeprefix("http://")) as channel:
            auth = rpc_pb2_grpc.AuthStub(channel)
            members = rpc_pb2_grpc.ClusterStub(channel)
            auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="rootpw"), timeout=10)
            auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"))
            auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="alice", password="alicepw"))
            auth.AuthEnable(rpc_pb2.AuthEnableRequest())

            def token(name: str, password: str) -> list[tuple[str, str]]:
                answer = auth.Authenticate(
                    rpc_pb2.AuthenticateRequest(name=name, password=password), timeout=10
                )
                return [("token", answer.token)]

            callers = {
                "no token": [],
                "alice": token("alice", "alicepw"),
                "root": token("root", "rootpw"),
            }
            added = 0
            for who, metadata in callers.items():
                try:
                    answer = members.MemberAdd(
                        rpc_pb2.MemberAddRequest(peerURLs=["http://127.0.0.1:1"], isLearner=True),
                        metadata=metadata,
                        timeout=10,
                    )
                    added = answer.member.ID
                    outcomes.append(f"{who} add: ok")
                except grpc.RpcError as error:
                    outcomes.append(f"{who} add: {error.code().name} {error.details()}")
            listed = members.MemberList(rpc_pb2.MemberListRequest(linearizable=True), timeout=10)
            outcomes.append(f"list without a token: {len(listed.members)} members")
            members.MemberRemove(
                rpc_pb2.MemberRemoveRequest(ID=added), metadata=callers["root"], timeout=10
            )
            outcomes.append("root remove: ok")
    assert outcomes == [
        "no token add: INVALID_ARGUMENT etcdserver: user name is empty",
        "alice add: PERMISSION_DENIED etcdserver: permission denied",
        "root add: ok",
        "list without a token: 4 members",
        "root remove: ok",
    ]
