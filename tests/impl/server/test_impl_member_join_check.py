"""A member started with `--initial-cluster-state existing` checks its --initial-cluster
against the cluster's members as etcd 3.5.1 does, ours and real etcd side by side:

- a member whose --initial-cluster entry (and peer URL) is not the one added refuses to
  start: "no match found for existing member (ID, [URL])";
- a member whose --initial-cluster names more members than the cluster has refuses to
  start: "member count is unequal";
- the member added has no name until it starts (MemberAdd carries none): listed with an
  empty name before, with its --name and client URL once it runs.

Both refusals exit non-zero (etcd 1; ours 2, etcdspec's usage error) and print etcd's
words.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])


def _listed(endpoint: str) -> list[tuple[str, bool, int]]:
    """(name, learner, number of client URLs) of each member, sorted."""
    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
        answer = rpc_pb2_grpc.ClusterStub(channel).MemberList(
            rpc_pb2.MemberListRequest(linearizable=True), timeout=10
        )
    return sorted((m.name, m.isLearner, len(m.clientURLs)) for m in answer.members)


@pytest.mark.parametrize("kind", KINDS)
def test_a_joining_member_checks_initial_cluster_and_names_itself(
    kind: str, tmp_path: Path
) -> None:
    program = etcd_procs.program_for(kind)
    with etcd_procs.cluster(kind, tmp_path, 1) as running:
        endpoint = running.endpoints[0]
        plan, added = launcher.plan_added_member(running.plan, "m2")
        with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
            answer = rpc_pb2_grpc.ClusterStub(channel).MemberAdd(
                rpc_pb2.MemberAddRequest(peerURLs=[added.peer_url], isLearner=True), timeout=10
            )
        assert answer.member.name == ""
        assert _listed(endpoint) == [("", True, 0), ("m1", False, 1)]

        # Another m2, on a peer URL nobody added: its entry matches no member.
        stray_plan, stray = launcher.plan_added_member(running.plan, "m2")
        # The added m2, with an --initial-cluster naming a third member.
        wider_plan, _ = launcher.plan_added_member(plan, "m3")
        wider = replace(added, data_dir=str(tmp_path / "wider.data"))
        refused = {
            "no match found for existing member": launcher.start_member(
                stray_plan, stray, program, state="existing"
            ),
            "member count is unequal": launcher.start_member(
                wider_plan, wider, program, state="existing"
            ),
        }
        running.members.extend(refused.values())
        for words, member in refused.items():
            assert member.process is not None
            assert member.process.wait(timeout=60) != 0, words
            log = Path(member.log_path).read_text(errors="replace")
            assert words in log, log[-2000:]
        assert _listed(endpoint) == [("", True, 0), ("m1", False, 1)]

        # Rightly started, it joins and the cluster learns its name and client URL.
        joined = launcher.start_member(plan, added, program, state="existing")
        running.members.append(joined)
        deadline = time.monotonic() + 30
        while (listed := _listed(endpoint)) != [("m1", False, 1), ("m2", True, 1)]:
            assert time.monotonic() < deadline, f"never named: {listed}"
            time.sleep(0.1)
