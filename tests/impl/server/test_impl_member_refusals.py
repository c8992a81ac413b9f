"""Refused membership changes, ours and real etcd 3.5.1 side by side: the same request
gets the same gRPC code and message, and changes nothing (the members listed after each
refusal are the same on both).

One single-member cluster per kind (no 5 s wait: a lone voter is "connected fully" at
once) runs one script of refusals in etcd's check order: bad peer URLs (etcd's
types.NewURLs rules), a peer URL that exists, removing the only voter (not enough
started members), unknown and removed members, promoting a voter, a second learner
(too many learners), promoting a learner that never started (not in sync), and a change
while another is pending: after a voter that never starts is added (etcd lets a
one-member cluster add one), a change cannot commit, and etcd's Raft drops the next one
silently (a conf change proposed while one is unapplied becomes an empty entry), so
that both callers meet their own deadline, where ours used to answer "unhealthy
cluster" at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])
PENDING_DEADLINE_S = 0.5  # the caller's deadline for the change that cannot commit

NOT_FOUND = "NOT_FOUND etcdserver: member not found"
BAD_URLS = "INVALID_ARGUMENT etcdserver: given member URLs are invalid"
PEER_URL_EXIST = "FAILED_PRECONDITION etcdserver: Peer URLs already exists"
# etcd 3.5.1 sends this one with code UNKNOWN (its server maps the error to rpctypes'
# client-side error, not to the gRPC status).
NOT_ENOUGH_STARTED = "UNKNOWN etcdserver: re-configuration failed due to not enough started members"
DEADLINE = "DEADLINE_EXCEEDED Deadline Exceeded"
# etcd's server meets the same deadline as its caller and answers then (parseProposeCtxErr);
# which of the two reaches the caller first is a race, so either is etcd's answer.
ETCD_AT_DEADLINE = {
    DEADLINE,
    "UNAVAILABLE etcdserver: request timed out",
    "UNAVAILABLE etcdserver: request timed out, possibly due to connection lost",
}

# (step, the outcome etcd 3.5.1 gives: an error, or "ok" for a step that sets up the
# next ones). {own}: the member's peer URL; {url1..4}: free ports; {learner}/{voter}:
# the ids the adds returned.
EXPECTED: list[tuple[str, str]] = [
    ("add with no peer URL", BAD_URLS),
    ("add an empty peer URL", BAD_URLS),
    ("add a URL without a scheme", BAD_URLS),
    ("add a URL of scheme ftp", BAD_URLS),
    ("add a URL without a port", BAD_URLS),
    ("add a URL with a path", BAD_URLS),
    ("add a URL that does not parse", BAD_URLS),
    ("add the member's own peer URL", PEER_URL_EXIST),
    ("add a learner with the member's peer URL", PEER_URL_EXIST),
    ("remove the only voter", NOT_ENOUGH_STARTED),
    ("remove an unknown member", NOT_FOUND),
    ("update an unknown member", NOT_FOUND),
    ("promote an unknown member", NOT_FOUND),
    ("promote the voter", "FAILED_PRECONDITION etcdserver: can only promote a learner member"),
    ("add a learner", "ok"),
    ("add a second learner", "FAILED_PRECONDITION etcdserver: too many learner members in cluster"),
    (
        "promote the learner that never started",
        "FAILED_PRECONDITION etcdserver: can only promote a learner member which is in sync "
        "with leader",
    ),
    ("update the voter to the learner's URL", PEER_URL_EXIST),
    ("remove the learner", "ok"),
    ("remove the learner again", NOT_FOUND),
    ("promote the removed learner", NOT_FOUND),
    ("update the removed learner", NOT_FOUND),
    ("add a voter that never starts", "ok"),
    ("update it: cannot commit (1 of 2 voters)", DEADLINE),
    ("remove it while the update is pending", DEADLINE),
]


def _member_rows(members: Any, urls: dict[str, str]) -> list[tuple[str, str, bool]]:
    """(name, peer URL label, learner) sorted: ports differ between the two runs."""
    label = {url: name for name, url in urls.items()}
    return sorted(
        (m.name, ",".join(label.get(u, "?") for u in m.peerURLs), m.isLearner) for m in members
    )


def _script(cluster: etcd_procs.Cluster) -> list[tuple[str, str, list[tuple[str, str, bool]]]]:
    """Each step's (name, outcome, the members listed after it, serializable)."""
    own = cluster.plan.members[0].peer_url
    free = launcher.free_ports(4)
    urls = {"own": own, **{f"url{i + 1}": f"http://127.0.0.1:{p}" for i, p in enumerate(free)}}
    voter = launcher.probe_status(cluster.endpoints[0])["member_id"]
    ids: dict[str, int] = {}
    rows: list[tuple[str, str, list[tuple[str, str, bool]]]] = []
    with grpc.insecure_channel(cluster.endpoints[0].removeprefix("http://")) as channel:
        stub = rpc_pb2_grpc.ClusterStub(channel)

        def add(peer_urls: list[str], learner: bool = False, key: str = "") -> Callable[[], Any]:
            def call() -> Any:
                request = rpc_pb2.MemberAddRequest(peerURLs=peer_urls, isLearner=learner)
                answer = stub.MemberAdd(request, timeout=10)
                if key:
                    ids[key] = answer.member.ID
                return answer

            return call

        def member(key: str | int) -> int:
            # An id the script got (0 when the add that gives it was refused) or a number.
            return key if isinstance(key, int) else ids.get(key, 0)

        def remove(key: str | int, timeout: float = 10) -> Callable[[], Any]:
            return lambda: stub.MemberRemove(
                rpc_pb2.MemberRemoveRequest(ID=member(key)), timeout=timeout
            )

        def update(key: str | int, url: str, timeout: float = 10) -> Callable[[], Any]:
            return lambda: stub.MemberUpdate(
                rpc_pb2.MemberUpdateRequest(ID=member(key), peerURLs=[url]),
                timeout=timeout,
            )

        def promote(key: str | int) -> Callable[[], Any]:
            return lambda: stub.MemberPromote(
                rpc_pb2.MemberPromoteRequest(ID=member(key)), timeout=10
            )

        ids["voter"] = voter
        steps: dict[str, Callable[[], Any]] = {
            "add with no peer URL": add([]),
            "add an empty peer URL": add([""]),
            "add a URL without a scheme": add([urls["url1"].removeprefix("http://")]),
            "add a URL of scheme ftp": add([urls["url1"].replace("http:", "ftp:")]),
            "add a URL without a port": add(["http://127.0.0.1"]),
            "add a URL with a path": add([urls["url1"] + "/peer"]),
            "add a URL that does not parse": add(["http://[::1"]),
            "add the member's own peer URL": add([own]),
            "add a learner with the member's peer URL": add([own], learner=True),
            "remove the only voter": remove("voter"),
            "remove an unknown member": remove(0x1234),
            "update an unknown member": update(0x1234, urls["url1"]),
            "promote an unknown member": promote(0x1234),
            "promote the voter": promote("voter"),
            "add a learner": add([urls["url1"]], learner=True, key="learner"),
            "add a second learner": add([urls["url2"]], learner=True),
            "promote the learner that never started": promote("learner"),
            "update the voter to the learner's URL": update("voter", urls["url1"]),
            "remove the learner": remove("learner"),
            "remove the learner again": remove("learner"),
            "promote the removed learner": promote("learner"),
            "update the removed learner": update("learner", urls["url2"]),
            "add a voter that never starts": add([urls["url3"]], key="new"),
            "update it: cannot commit (1 of 2 voters)": update(
                "new", urls["url4"], timeout=PENDING_DEADLINE_S
            ),
            "remove it while the update is pending": remove("new", timeout=PENDING_DEADLINE_S),
        }
        quorum = True
        for name, call in steps.items():
            try:
                call()
                outcome = "ok"
            except grpc.RpcError as error:
                outcome = f"{error.code().name} {error.details()}"
            # Linearizable while there is a quorum: etcd answers a change before its Raft
            # has taken the entry as applied, and drops a change proposed in that moment
            # (as pending); a read through Raft waits past it. Serializable after.
            quorum = quorum and name != "add a voter that never starts"
            listed = stub.MemberList(rpc_pb2.MemberListRequest(linearizable=quorum), timeout=10)
            rows.append((name, outcome, _member_rows(listed.members, urls)))
    return rows


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, list[tuple[str, str, list[tuple[str, str, bool]]]]]:
    found = {}
    for kind in KINDS:
        directory: Path = tmp_path_factory.mktemp(f"refusals-{kind}")
        # A long election timeout: the lone voter stays leader (check quorum) while the
        # last two steps wait for their deadline.
        with etcd_procs.cluster(kind, directory, 1, heartbeat_ms=200, election_ms=4000) as cluster:
            found[kind] = _script(cluster)
    return found


@pytest.mark.parametrize("index", range(len(EXPECTED)), ids=[name for name, _ in EXPECTED])
def test_a_refused_change_answers_as_etcd_and_changes_nothing(
    runs: dict[str, list[tuple[str, str, list[tuple[str, str, bool]]]]], index: int
) -> None:
    name, expected = EXPECTED[index]
    ours = runs["ours"][index]
    assert ours[:2] == (name, expected)
    if expected != "ok":  # a refusal changes nothing: the members are the step before's
        before = runs["ours"][index - 1][2] if index else [("m1", "own", False)]
        assert ours[2] == before
    if "etcd" not in runs:
        pytest.skip("no etcd binary to compare with")
    theirs = runs["etcd"][index]
    if expected == DEADLINE and theirs[1] in ETCD_AT_DEADLINE:
        theirs = (theirs[0], DEADLINE, theirs[2])
    assert ours == theirs
