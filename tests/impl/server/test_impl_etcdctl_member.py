"""etcdctl `member list/add/update/promote/remove` against a 3-member cluster of ours and
against real etcd 3.5.1: the same script, the same transcript once ids, URLs and terms
are masked (the members' order, which follows their random ids, is sorted).

The script adds a learner that never starts (so promoting it is refused: not in sync),
updates its peer URL, lists the members as a table and as JSON, removes it (twice: the
second is "member not found"), and asks for etcd's refusals: promoting a voter, a peer
URL that exists, updating an unknown member. Both etcdctl 3.5 (venv) and 3.4 (Debian)
run it when present.
"""

from __future__ import annotations

import json
import re
import time

import etcd_procs
import pytest

from etcdspec.impl.tools import launcher

HEALTH_INTERVAL_S = 5.5  # etcd refuses changes until its voters are connected for 5 s

# (etcdctl arguments): {leader} is the leader's id, {new} the id `member add` printed,
# {url1}/{url2} peer URLs no member uses, {taken} a member's peer URL.
SCRIPT: list[tuple[str, ...]] = [
    ("member", "promote", "{leader}"),
    ("member", "list"),
    ("member", "add", "m4", "--peer-urls={url1}", "--learner"),
    ("member", "list"),
    ("member", "promote", "{new}"),
    ("member", "update", "{new}", "--peer-urls={url2}"),
    ("member", "list", "-w", "json"),
    ("member", "add", "m5", "--peer-urls={taken}"),
    ("member", "add", "m5", "--peer-urls={url2}"),
    ("member", "update", "1234", "--peer-urls={url1}"),
    ("member", "remove", "{new}"),
    ("member", "remove", "{new}"),
    ("member", "list", "-w", "fields"),
]

_MASKS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"http://127\.0\.0\.1:\d+"), "URL"),
    # Ids as hex; etcd's ids are random, so some have only 12 or 13 digits. Decimal runs
    # of 10 or more digits are masked below anyway.
    (re.compile(r'"(cluster_id|member_id|ID|raft_term)":\d+'), r'"\1":N'),
    (re.compile(r'"(ClusterID|MemberID|ID|RaftTerm)" : \d+'), r'"\1" : N'),
    # after the decimal fields: an id whose decimal has 12-16 digits (an id under 10**16)
    # also reads as hex, and was masked "ID" on one side where the other's gave "N".
    (re.compile(r"\b[0-9a-f]{12,16}\b"), "ID"),
    (re.compile(r"\b\d{10,}\b"), "ID"),
    # etcdctl prints ids with %16x: a shorter id (either server's) is padded with spaces,
    # the member's and the cluster's ("Member  ID added to cluster   ID").
    (re.compile(r"(Member|cluster) +ID"), r"\1 ID"),
]


def _sorted_json(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and isinstance(data.get("members"), list):
        data["members"].sort(key=lambda m: (m.get("name", ""), m.get("peerURLs", [])))
        return json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n"
    return text


def mask(text: str) -> str:
    text = _sorted_json(text)
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    lines = []
    for line in text.splitlines():
        if line.startswith("ETCD_INITIAL_CLUSTER="):
            items = sorted(line.removeprefix("ETCD_INITIAL_CLUSTER=").strip('"').split(","))
            line = f'ETCD_INITIAL_CLUSTER="{",".join(items)}"'
        lines.append(line)
    # member list (table or fields) rows follow the members' ids: sort the rows.
    if lines and re.match(r"^ID, (started|unstarted)", lines[0]):
        lines.sort()
    if any(line.startswith('"MemberID"') for line in lines):
        lines = _sort_field_blocks(lines)
    return "\n".join(lines)


def _sort_field_blocks(lines: list[str]) -> list[str]:
    """`-w fields` prints a header, then one block of lines per member (from "ID"):
    order the blocks, as the members' ids differ."""
    head: list[str] = []
    blocks: list[list[str]] = []
    for line in lines:
        if line.startswith('"ID" :'):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
        else:
            head.append(line)
    return head + [line for block in sorted(blocks) for line in block]


def run_script(cluster: etcd_procs.Cluster, binary: str) -> list[str]:
    statuses = launcher.wait_ready(cluster.endpoints)
    leader = statuses[cluster.endpoints[0]]["leader"]
    # Every call to the leader: a follower lists a change a moment after the leader
    # answered it (etcd's too), which would make the transcript racy.
    endpoints = [e for e, s in statuses.items() if s["member_id"] == leader]
    url1, url2 = (f"http://127.0.0.1:{port}" for port in launcher.free_ports(2))
    values = {
        "{leader}": f"{leader:x}",
        "{url1}": url1,
        "{url2}": url2,
        "{taken}": cluster.plan.members[1].peer_url,
        "{new}": "0",
    }
    transcript = []
    for args in SCRIPT:
        actual = list(args)
        for key, value in values.items():
            actual = [a.replace(key, value) for a in actual]
        result = etcd_procs.etcdctl(endpoints, *actual, binary=binary)
        found = re.search(r"Member +([0-9a-f]+) added", result.stdout)
        if found:
            values["{new}"] = found.group(1)
        error = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        transcript.append(
            f"$ etcdctl {' '.join(args)} -> {result.returncode}\n"
            + mask(result.stdout)
            + ("\n" + mask(error[-1]) if error else "")
        )
    return transcript


BINARIES = [b for b in (etcd_procs.ETCDCTL_35, etcd_procs.ETCDCTL_34) if b is not None]
KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])


@pytest.fixture(scope="module")
def transcripts(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[str]]:
    """One cluster of each kind, started together, each running the script once per
    etcdctl: the script leaves the members as it found them (the learner it adds is
    removed), so the second run meets the same three members, on both kinds alike."""
    results: dict[tuple[str, str], list[str]] = {}
    kinds = [(kind, tmp_path_factory.mktemp(f"member-{kind}")) for kind in KINDS]
    with etcd_procs.clusters(kinds, 3) as started:
        time.sleep(HEALTH_INTERVAL_S)
        for cluster in started:
            for binary in BINARIES:
                results[(cluster.kind, binary)] = run_script(cluster, binary)
    return results


@pytest.mark.parametrize("binary", BINARIES)
def test_etcdctl_member_commands_match_etcd(
    transcripts: dict[tuple[str, str], list[str]], binary: str
) -> None:
    ours = transcripts[("ours", binary)]
    assert any("Member ID added to cluster ID" in step for step in ours)
    if ("etcd", binary) not in transcripts:
        pytest.skip("no etcd binary to compare with")
    for mine, theirs in zip(ours, transcripts[("etcd", binary)], strict=True):
        assert mine == theirs
