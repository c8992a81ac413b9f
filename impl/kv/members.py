"""The cluster's members as the state machine keeps them: records, changes, checks.

A `MemberRecord` is what etcd keeps of a member in its `members` bucket (id, name, peer
and client URLs, learner flag), encoded as the same JSON. A `MemberChange` is one
configuration change as the log carries it (add, add as learner, remove, update the peer
URLs, promote), with the record it concerns; `check_change` is etcd's check of a change
against the members at the point it is applied (etcd's ValidateConfigurationChange):
the same checks run again at apply time, in log order, so two changes that each passed
on their proposer cannot both take effect if together they conflict.

`MemberTable` reads and writes the records in the backend (its `member` table), so that
they are committed with the consistent index of the entry that changed them, survive a
restart and travel in snapshots with the rest of the database. Removed members stay, as
etcd's `members_removed` bucket, so that their ids are never reused. Only the log (and
the identical bootstrap of a new cluster) writes them. A member's name and client URLs
come from the log too: each member publishes them when it starts (etcd's
ClusterMemberAttrSet), and `MemberTable.publish` applies that, so that every member
lists them, a member that is down included, across restarts and in snapshots. The name
--initial-cluster gave a member at bootstrap is kept apart (`initial_name`): it is the
one etcd 3.5.1 keeps in its `members` bucket, where published attributes never go.

Pure but for the backend calls; not thread-safe (the member's event loop).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, replace
from typing import Any

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.pb import rpc_pb2

# etcd 3.5's --max-learners default: at most one learner at a time.
MAX_LEARNERS = 1


@dataclass(frozen=True)
class MemberRecord:
    """One member as etcd records it (etcd's membership.Member, as JSON)."""

    member_id: int
    name: str = ""
    peer_urls: tuple[str, ...] = ()
    client_urls: tuple[str, ...] = ()
    is_learner: bool = False
    # etcd 3.5.1 lists a learner whose peer URLs were updated as a voter (see
    # `changed_members`); its Raft role stays learner (`is_learner`).
    listed_as_voter: bool = False
    # The name --initial-cluster gave the member at bootstrap (etcd's members bucket
    # keeps it; a member added later has none); `name` is the one listed: the initial
    # name, or the one the member published.
    initial_name: str = ""

    @property
    def listed_learner(self) -> bool:
        """The learner flag etcd's answers show."""
        return self.is_learner and not self.listed_as_voter

    @property
    def started(self) -> bool:
        """etcd's IsStarted: the member has a name (from --initial-cluster, or the one it
        published through the log when it started)."""
        return bool(self.name)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.member_id,
            "name": self.name,
            "peerURLs": list(self.peer_urls),
            "clientURLs": list(self.client_urls),
            "isLearner": self.is_learner,
        }
        if self.listed_as_voter:
            data["listedAsVoter"] = True
        data["initialName"] = self.initial_name
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> MemberRecord:
        try:
            return MemberRecord(
                member_id=int(data["id"]),
                name=str(data.get("name", "")),
                peer_urls=tuple(str(url) for url in data.get("peerURLs", [])),
                client_urls=tuple(str(url) for url in data.get("clientURLs", [])),
                is_learner=bool(data.get("isLearner", False)),
                listed_as_voter=bool(data.get("listedAsVoter", False)),
                # Records written before names were published through the log held
                # the initial name only.
                initial_name=str(data.get("initialName", data.get("name", ""))),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a member record: {data!r} ({error})") from error

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    @staticmethod
    def decode(data: bytes) -> MemberRecord:
        try:
            parsed = json.loads(data)
        except ValueError as error:
            raise ValueError(f"not a member record: {data[:80]!r} ({error})") from error
        if not isinstance(parsed, dict):
            raise ValueError(f"not a member record: {data[:80]!r}")
        return MemberRecord.from_json(parsed)

    def to_pb(self) -> rpc_pb2.Member:
        return rpc_pb2.Member(
            ID=self.member_id,
            name=self.name,
            peerURLs=list(self.peer_urls),
            clientURLs=list(self.client_urls),
            isLearner=self.listed_learner,
        )

    def describe(self) -> str:
        role = "learner" if self.is_learner else "voter"
        role += " (listed as a voter)" if self.listed_as_voter else ""
        name = self.name or "(unstarted)"
        return f"{name}({self.member_id:x}) {role} peers {','.join(self.peer_urls)}"


class ChangeKind(enum.Enum):
    """The configuration changes etcd's Cluster service makes."""

    ADD = "add"
    ADD_LEARNER = "add-learner"
    REMOVE = "remove"
    UPDATE = "update"
    PROMOTE = "promote"


@dataclass(frozen=True)
class MemberChange:
    """One configuration change: its kind and the member record it concerns (for a
    remove or promote, only the id matters)."""

    kind: ChangeKind
    record: MemberRecord

    def describe(self) -> str:
        return f"{self.kind.value} {self.record.describe()}"


def check_change(members: dict[int, MemberRecord], removed: set[int], change: MemberChange) -> None:
    """Raise RpcError with etcd's error if `change` cannot apply to `members` (the
    current records by id; `removed`: the ids removed before)."""
    record, kind = change.record, change.kind
    current = members.get(record.member_id)
    if kind in (ChangeKind.ADD, ChangeKind.ADD_LEARNER):
        if record.member_id in removed or current is not None:
            raise RpcError(errors.MEMBER_EXIST)
        _check_urls_free(members, record)
        if kind is ChangeKind.ADD_LEARNER:
            learners = sum(1 for m in members.values() if m.listed_learner)
            if learners + 1 > MAX_LEARNERS:
                raise RpcError(errors.TOO_MANY_LEARNERS)
        return
    if current is None:
        raise RpcError(errors.MEMBER_NOT_FOUND)
    if kind is ChangeKind.UPDATE:
        _check_urls_free(members, record)
    elif kind is ChangeKind.PROMOTE and not current.listed_learner:
        raise RpcError(errors.MEMBER_NOT_LEARNER)


def _check_urls_free(members: dict[int, MemberRecord], record: MemberRecord) -> None:
    taken = {
        url
        for other in members.values()
        if other.member_id != record.member_id
        for url in other.peer_urls
    }
    if taken.intersection(record.peer_urls):
        raise RpcError(errors.PEER_URL_EXIST)


def changed_members(
    members: dict[int, MemberRecord], change: MemberChange
) -> tuple[MemberRecord, bool]:
    """The record `change` writes and whether it marks the member removed."""
    record, kind = change.record, change.kind
    current = members.get(record.member_id, record)
    if kind is ChangeKind.ADD:
        return replace(record, is_learner=False), False
    if kind is ChangeKind.ADD_LEARNER:
        return replace(record, is_learner=True), False
    if kind is ChangeKind.REMOVE:
        return current, True
    if kind is ChangeKind.UPDATE:
        # etcd 3.5.1 writes the update's raft attributes whole, whose learner flag is
        # false: a learner updated is listed as a voter from then on, and can no longer
        # be promoted (its Raft role does not change). Kept, so that the answers are etcd's.
        listed_as_voter = current.listed_as_voter or current.is_learner
        return replace(current, peer_urls=record.peer_urls, listed_as_voter=listed_as_voter), False
    return replace(current, is_learner=False), False  # PROMOTE


class MemberTable:
    """The member records in the backend (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def all(self) -> tuple[dict[int, MemberRecord], set[int]]:
        """(the current members by id, the ids of removed members)."""
        members: dict[int, MemberRecord] = {}
        removed: set[int] = set()
        for member_id, data, gone in self.backend.member_records():
            if gone:
                removed.add(member_id)
            else:
                members[member_id] = MemberRecord.decode(data)
        return members, removed

    def current(self) -> list[MemberRecord]:
        """The current members, by id."""
        members, _ = self.all()
        return [members[i] for i in sorted(members)]

    def seed(self, records: list[MemberRecord], self_id: int) -> bool:
        """Record the initial members (a new cluster's --initial-cluster) if the table is
        empty: the same on every member, outside the log, as etcd's bootstrap. A table
        that does not know `self_id` at all (data made under another member id: the
        same data directory started with other URLs) is replaced by them too: whether it
        was (the data's Raft configuration is then the flags' too)."""
        known = self.backend.member_records()
        if any(member_id == self_id for member_id, _, _ in known):
            return False
        with self.backend.transaction():
            for member_id, data, _ in known:
                self.backend.put_member_record(member_id, data, removed=True)
            for record in records:
                self.backend.put_member_record(record.member_id, record.encode())
        self.backend.flush()
        return bool(known)

    def publish(self, member_id: int, name: str, client_urls: tuple[str, ...]) -> bool:
        """Set the attributes member `member_id` published (inside the caller's backend
        transaction); whether it is a current member (etcd skips the attributes of a
        removed member, and of one it does not know: they change nothing)."""
        members, _ = self.all()
        current = members.get(member_id)
        if current is None:
            return False
        record = replace(current, name=name, client_urls=client_urls)
        self.backend.put_member_record(member_id, record.encode())
        return True

    def write(self, change: MemberChange) -> MemberRecord:
        """Write what `change` does (inside the caller's backend transaction); the record
        written. Raises RpcError, writing nothing, if etcd's checks refuse it."""
        members, removed = self.all()
        check_change(members, removed, change)
        record, gone = changed_members(members, change)
        self.backend.put_member_record(record.member_id, record.encode(), removed=gone)
        return record
