"""Failpoints: named, deliberately planted bugs in the reference server, off by default.

As etcd's gofail: a member reads the environment variable ETCDSPEC_FAILPOINTS once, when
it starts (`activate_from_environment`); it names the failpoints to switch on, comma
separated. An unknown name refuses the start (FailpointError lists the known ones). Each
hook in the server is one `if failpoints.on("name"):` at the spot it breaks; with no
failpoint named, `on()` is False everywhere and the server behaves exactly as without
hooks. The conformance tests switch them on to show that a run finds each bug.

The active set is process-wide (a member is one process). Tests that run code in-process
switch failpoints with the `active(...)` context manager, which restores the previous set.

Known failpoints (FAILPOINTS holds the one-line description of each):
- ack_before_fsync: a Ready's messages (appends, acknowledgements to the leader, votes)
  leave, and its committed entries are applied and answered, before its WAL write, which
  then goes to the file without an fsync.
- local_linearizable_read: linearizable reads are served from local state, with no
  ReadIndex round (as serializable ones).
- skip_watch_event_on_resume: a watch created with a start revision in the past drops
  the first event of its catch-up.
- forget_vote_on_restart: the vote is never written to the WAL (the term is), so after a
  restart the member may vote again in a term it already voted in.
- stale_leader_lease_revoke: the leader revokes an expired lease by applying the revoke
  to its own state instead of proposing it through the log, as a leader that lost its
  quorum and does not know it yet would.
- keepalive_after_expiry: the leader answers a keep-alive of a lease whose expiry has
  passed but which is still held (its revoke not yet proposed, or proposed and not yet
  applied) with the lease's full TTL, instead of refusing it (etcd's Renew waits for
  the pending revoke): the revoke then deletes the keys right after the acknowledgement.
  The leader also proposes an expired lease's revoke only REVOKE_LAG_S after its expiry,
  as a loaded leader would: the window the bug needs stays open long enough for the
  lease-guarantee workload's late keep-alive to meet it on a loaded machine (it missed
  in four runs of a CI-like test run with the window as narrow as one tick).
- lock_without_wait: v3lock's Lock answers at once with the caller's key, without
  waiting for the keys ahead of it in the lock's queue to be deleted (two holders).
- snap_skip_crc: a snapshot file's checksum is not checked when it is read, so a file
  damaged on disk is used as it reads (conform's corrupt-snap fault catches it).
- auth_skip_range_check: with auth enabled, the auth store's READ check of a range
  passes for anyone (a token is still needed): any user reads any key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

ENV_VAR = "ETCDSPEC_FAILPOINTS"
# keepalive_after_expiry: how long after its expiry an expired lease's revoke is proposed.
# Under the lease checker's tolerance (1.1 s of a 2 s TTL), so the revoke still deletes
# the key before a late keep-alive's acknowledged deadline.
REVOKE_LAG_S = 0.2

FAILPOINTS: dict[str, str] = {
    "ack_before_fsync": "messages sent and entries answered before the WAL write; no fsync",
    "local_linearizable_read": "linearizable reads served from local state, no ReadIndex",
    "skip_watch_event_on_resume": "a watch from a past revision drops its first event",
    "forget_vote_on_restart": "the vote is not persisted: a restarted member votes again",
    "stale_leader_lease_revoke": "the leader revokes expired leases locally, not via the log",
    "wal_skip_payload_crc": "WAL replay takes a record's payload without its checksum",
    "keepalive_after_expiry": "the leader acknowledges a keep-alive of an expired lease",
    "snap_skip_crc": "a snapshot file is read without its checksum",
    "lock_without_wait": "Lock is granted at once, without waiting for the keys ahead of it",
    "auth_skip_range_check": "with auth enabled, a range is served without the READ check",
}

_active: frozenset[str] = frozenset()


class FailpointError(ValueError):
    """A failpoint name that does not exist; the message lists the known ones."""


def parse(text: str, source: str = ENV_VAR) -> frozenset[str]:
    """The failpoint names in `text` (comma separated, blanks ignored); unknown -> error
    naming `source` (where the names came from: the variable, or a command-line flag)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted({name for name in names if name not in FAILPOINTS})
    if unknown:
        raise FailpointError(
            f"{source}: unknown failpoint(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(FAILPOINTS))}"
        )
    return frozenset(names)


def activate(names: Iterable[str]) -> frozenset[str]:
    """Switch on exactly `names` (checked); return the active set."""
    global _active
    _active = parse(",".join(names))
    return _active


def activate_from_environment(environ: dict[str, str] | None = None) -> frozenset[str]:
    """Read ETCDSPEC_FAILPOINTS (unset or empty: none) and switch those on."""
    source = os.environ if environ is None else environ
    return activate(source.get(ENV_VAR, "").split(","))


def on(name: str) -> bool:
    """Whether failpoint `name` is switched on (a hook's one test)."""
    return name in _active


def active_names() -> frozenset[str]:
    return _active


def describe() -> str:
    """The one text for logs: the active failpoints, or `none`."""
    return ",".join(sorted(_active)) or "none"


@contextmanager
def active(*names: str) -> Iterator[frozenset[str]]:
    """Switch on `names` for the block (in-process tests), then restore the previous set."""
    global _active
    before = _active
    try:
        yield activate(names)
    finally:
        _active = before
