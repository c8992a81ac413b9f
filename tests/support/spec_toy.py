"""The toy spec the proof tests share: two sorts, an election with a seeded mutation.

`toy_spec(extra_actions=..., witness=...)` gives its text; tests that need an action
more (one the frame rule settles) or no witness say so.
"""

from __future__ import annotations

_HEAD = """
sort node
sort term ordered
rigid constant zero: term
axiom zero_least: forall t: term. zero <= t
function current_term(node): term
relation leader(node, term)
init ct: forall n: node. current_term(n) = zero
init nol: forall n: node, t: term. !leader(n, t)
action elect(n: node, t: term) {
  require current_term(n) < t;
  [others] require forall m: node, u: term. leader(m, u) -> u < t;
  current_term(n) := t;
  leader(n, t) := true;
  mutation unchecked "elect without looking at other leaders" { [others] skip; }
}
action restart(n: node) { forall t: term. leader(n, t) := false; }
"""
_PROPERTIES = """invariant leader_term: forall n: node, t: term. leader(n, t) -> t <= current_term(n)
safety one_leader: forall n: node, m: node, t: term. leader(n, t) & leader(m, t) -> n = m
"""
_WITNESS = (
    "witness elect_twice { run elect, restart, elect; "
    "reach exists n: node, t: term. leader(n, t); }\n"
)
NOOP_ACTION = "action noop(n: node) { require current_term(n) = zero; }\n"


def toy_spec(extra_actions: str = "", witness: bool = True) -> str:
    """The toy spec's text, with `extra_actions` after its two actions."""
    return _HEAD + extra_actions + _PROPERTIES + (_WITNESS if witness else "")
