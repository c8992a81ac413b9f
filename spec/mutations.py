"""The catalogue of seeded spec bugs: each mutation, the step that exposes it, and the
property whose induction it breaks.

`catch(bug)` runs the one targeted query (that action, that property, stop at the first
failure) and returns the report; the bug counts as caught when the verdict is FALSE
with a counterexample. The test suite and the `etcdspec verify` stage both use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from etcdspec.spec.loader import load_spec
from etcdspec.spec.proof_report import ProofReport
from etcdspec.spec.prove import prove
from etcdspec.verdict import Verdict


@dataclass(frozen=True)
class SeededBug:
    spec: str
    mutation: str
    action: str
    prop: str

    def describe(self) -> str:
        return f"{self.spec} --mutation {self.mutation}: {self.prop} broken by {self.action}"


SEEDED_BUGS: tuple[SeededBug, ...] = (
    SeededBug("raft", "figure8", "commit", "leader_completeness"),
    SeededBug("raft", "two_votes", "receive_request_vote", "one_vote_per_term"),
    SeededBug("raft", "no_truncation", "receive_append", "log_matching"),
    SeededBug("raft", "stale_append", "receive_append", "leader_completeness"),
    SeededBug("raft_steps", "second_vote", "grant_vote", "durable_vote_kept"),
    SeededBug("raft_steps", "vote_not_persisted", "crash", "durable_vote_kept"),
    SeededBug("mvcc", "reuse_revision", "put", "one_txn_per_revision"),
    SeededBug("mvcc", "compact_future", "compact", "compact_le_current"),
    SeededBug("lease", "attach_revoked", "put_with_lease", "no_key_on_revoked_lease"),
    SeededBug("lease", "revoke_keeps_keys", "revoke", "no_key_on_revoked_lease"),
    SeededBug("lease", "no_checkpoint", "advance", "no_key_on_expired_lease"),
    SeededBug("lease", "keepalive_after_expiry", "keepalive", "keepalive_honoured"),
    SeededBug("auth", "revoke_no_bump", "revoke_permission", "snapshot_current"),
    SeededBug("auth", "stale_token", "access", "access_in_force"),
    SeededBug("raft_member", "no_term_commit", "propose_config", "entry_config"),
)


CATCH_TIMEOUT_MS = 10_000


def catch(bug: SeededBug, timeout_ms: int = CATCH_TIMEOUT_MS) -> ProofReport:
    """Prove the bug's property across its action with the mutation on."""
    loaded = load_spec(bug.spec, bug.mutation)
    return prove(loaded, timeout_ms, only=[bug.prop], actions=[bug.action], fail_fast=True)


def caught(report: ProofReport) -> bool:
    return report.verdict is Verdict.FALSE and report.first_counterexample() is not None
