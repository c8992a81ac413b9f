"""A spec's proof does not depend on what was proved before it in the process: each
Prover encodes its spec in a Z3 context of its own, where the names Z3's search
depends on (the finite instances' enumeration sorts) are numbered from the start.
Before, raft_steps' "can fire" model searches took 27M rlimit after raft's proof
against 53k as the first spec of a process (docs/benchmarks.md, issue 23)."""

from __future__ import annotations

from etcdspec.spec.loader import load_spec
from etcdspec.spec.proof_report import CheckResult
from etcdspec.spec.prove import Prover, prove
from etcdspec.verdict import Verdict


def _can_fire(name: str) -> list[CheckResult]:
    loaded = load_spec(name)
    prover = Prover(loaded)
    return [prover.check_enabled(action) for action in loaded.spec.actions()]


def test_raft_steps_model_searches_cost_the_same_after_raft() -> None:
    before = _can_fire("raft_steps")
    # raft's model searches encode finite instances of the same sort names first
    raft = prove(load_spec("raft"), jobs=1, actions=["commit"])
    assert raft.verdict is Verdict.TRUE, [r.describe() for r in raft.failures()]
    after = _can_fire("raft_steps")
    assert [r.verdict for r in before] == [Verdict.TRUE] * len(before)
    assert [(r.subject, r.verdict, r.rlimit) for r in after] == [
        (r.subject, r.verdict, r.rlimit) for r in before
    ]
    assert all(r.rlimit is not None and r.rlimit > 0 for r in after)
