"""Joining an existing cluster: a new member learns its id, the cluster's id and members.

A member added with MemberAdd is given its id by the cluster (etcd: from its peer URLs,
the cluster token and the time), so it cannot derive it from its flags. Started with
`--initial-cluster-state existing` on an empty data directory, it asks the members that
--initial-cluster names (a members query on their peer port: server.peer) for the
cluster's id and members, checks its --initial-cluster against them as etcd does
(`match_initial_cluster`, etcd's ValidateClusterAndAssignIDs: as many entries as the
cluster has members, and each member's peer URLs those of one entry; else it refuses to
start with etcd's words, "member count is unequal" or "PeerURLs: no match found for
existing member (ID, [URLS])", and the --initial-cluster to give instead), takes the id
of the member its own entry (--name) matched, and keeps what it learnt in its data directory
(IDENTITY_FILE, JSON, version 1) so that every later start is the same member of the same
cluster. `member_config_for` gives the configuration it then runs with: its peers, ids
and cluster id as the cluster recorded them.

A member whose peer URL the cluster does not list is refused (JoinError) with what to do:
add it first (`etcdctl member add NAME --peer-urls=URL`).

Its name is not in the member records until it runs: MemberAdd carries none (etcd lists
the added member with an empty name, "unstarted"); the members learn it from the new
member's hello once it connects (server.cluster.ClusterView.members).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from etcdspec.impl.kv.members import MemberRecord
from etcdspec.impl.server.config import MemberConfig, PeerInfo, parse_url
from etcdspec.impl.server.peer import FrameError, query_peer

IDENTITY_FILE = Path("member") / "identity.json"
IDENTITY_VERSION = 1
JOIN_TIMEOUT_S = 30.0


class JoinError(RuntimeError):
    """The member could not join the cluster; the message says why and what to do."""


@dataclass(frozen=True)
class Identity:
    """Who a joined member is: its id, its cluster's id, the members when it joined."""

    member_id: int
    cluster_id: int
    members: tuple[MemberRecord, ...]

    def describe(self) -> str:
        return (
            f"member {self.member_id:x} of cluster {self.cluster_id:x}, {len(self.members)} members"
        )


def read_identity(data_dir: str | os.PathLike[str]) -> Identity | None:
    """The identity a joined member kept in `data_dir`, or None (never joined)."""
    path = Path(data_dir) / IDENTITY_FILE
    try:
        data = json.loads(path.read_text())
        if data.get("version") != IDENTITY_VERSION:
            raise JoinError(f"{path}: version {data.get('version')!r}, expected 1")
        return Identity(
            member_id=int(data["member_id"]),
            cluster_id=int(data["cluster_id"]),
            members=tuple(MemberRecord.from_json(m) for m in data["members"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise JoinError(f"{path}: not a readable identity file ({error})") from error


def write_identity(data_dir: str | os.PathLike[str], identity: Identity) -> None:
    path = Path(data_dir) / IDENTITY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "version": IDENTITY_VERSION,
                "member_id": identity.member_id,
                "cluster_id": identity.cluster_id,
                "members": [m.to_json() for m in identity.members],
            },
            indent=2,
        )
        + "\n"
    )
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    tmp.replace(path)


def members_answer(cluster_id: int, members: list[MemberRecord]) -> dict[str, Any]:
    """What a member answers a members query."""
    return {"cluster_id": cluster_id, "members": [m.to_json() for m in members]}


async def join_cluster(config: MemberConfig, timeout_s: float = JOIN_TIMEOUT_S) -> Identity:
    """Ask the other members of --initial-cluster who this member is (see the module
    docstring); retried until one answers or `timeout_s` passes."""
    own_url = config.initial_advertise_peer_urls[0].url
    others = [(name, e) for name, e in config.initial_cluster if e.url != own_url]
    if not others:
        raise JoinError(
            "--initial-cluster-state existing: --initial-cluster names no other member to "
            "join; list the cluster's members and this one"
        )
    deadline = time.monotonic() + timeout_s
    problems: list[str] = []
    while True:
        for name, endpoint in others:
            try:
                answer = await query_peer(endpoint.host, endpoint.port, {"query": "members"})
            except (OSError, TimeoutError, FrameError) as error:
                problems.append(f"{name} at {endpoint.url}: {error}")
                continue
            try:
                members = tuple(MemberRecord.from_json(m) for m in answer["members"])
                cluster_id = int(answer["cluster_id"])
            except (KeyError, TypeError, ValueError) as error:
                problems.append(f"{name} at {endpoint.url}: bad answer {answer!r} ({error})")
                continue
            ids = match_initial_cluster(config, members)
            return Identity(ids[config.name], cluster_id, members)
        if time.monotonic() > deadline:
            raise JoinError(
                f"no member of --initial-cluster answered in {timeout_s:.0f} s: "
                + "; ".join(problems[-len(others) :])
            )
        await asyncio.sleep(0.2)


def match_initial_cluster(
    config: MemberConfig, members: tuple[MemberRecord, ...]
) -> dict[str, int]:
    """The member id of each --initial-cluster entry, by name, matched to the cluster's
    `members` by peer URLs as etcd's ValidateClusterAndAssignIDs does; JoinError (etcd's
    words, then the --initial-cluster that matches) when they do not match."""
    entries: dict[str, set[str]] = {}
    for name, endpoint in config.initial_cluster:
        entries.setdefault(name, set()).add(endpoint.url)
    own_url = config.initial_advertise_peer_urls[0].url
    wanted = ",".join(
        f"{record.name or (config.name if own_url in record.peer_urls else '<name>')}={url}"
        for record in members
        for url in record.peer_urls
    )
    advice = f"; start with the cluster's members and this one: --initial-cluster={wanted}"
    if not any(own_url in record.peer_urls for record in members):
        advice = (
            f"; the cluster has no member with peer URL {own_url}: add it first "
            f"(etcdctl member add {config.name} --peer-urls={own_url})"
        )
    if len(entries) != len(members):
        raise JoinError(
            f"error validating peerURLs: member count is unequal (the cluster has "
            f"{len(members)} members, --initial-cluster names {len(entries)})" + advice
        )
    ids: dict[str, int] = {}
    for record in members:
        found = next((n for n, urls in entries.items() if urls == set(record.peer_urls)), None)
        if found is None:
            raise JoinError(
                f"error validating peerURLs: PeerURLs: no match found for existing member "
                f"({record.member_id:x}, [{' '.join(record.peer_urls)}])" + advice
            )
        ids[found] = record.member_id
    return ids


def member_config_for(config: MemberConfig, identity: Identity) -> MemberConfig:
    """`config` as the joined member runs: the cluster's members and ids, its cluster id."""
    peers = []
    for record in identity.members:
        if not record.peer_urls:
            continue
        name = config.name if record.member_id == identity.member_id else record.name
        peers.append(
            PeerInfo(
                name=name or f"{record.member_id:x}",
                member_id=record.member_id,
                peer=parse_url(record.peer_urls[0], "peerURLs"),
            )
        )
    return replace(config, peers=tuple(peers), cluster_id_override=identity.cluster_id)


async def prepare(config: MemberConfig) -> MemberConfig:
    """The configuration to run with: as given, or, for a member that joined (or joins
    now: --initial-cluster-state existing on an empty data directory), its identity's."""
    if config.initial_cluster_state != "existing":
        return config
    identity = read_identity(config.data_dir)
    if identity is None:
        if (Path(config.data_dir) / "member").exists():
            return config  # a member of the initial cluster, restarted on its data
        identity = await join_cluster(config)
        write_identity(config.data_dir, identity)
    return member_config_for(config, identity)
