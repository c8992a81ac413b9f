"""The ground (finite-instance) encoding used by BMC has no quantifier left, and a step
moved to another depth by substitution is the step encoded there directly."""

from __future__ import annotations

import pytest
import z3

from etcdspec.spec.ground import GroundEncoder
from etcdspec.spec.loader import load_spec
from etcdspec.spec.z3backend import Vocabulary

SIZES = {"node": 2, "quorum": 1, "value": 1, "term": 2, "index": 2}


def _has_quantifier(term: z3.ExprRef) -> bool:
    pending, seen = [term], set()
    while pending:
        node = pending.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if z3.is_quantifier(node):
            return True
        pending.extend(node.children())
    return False


def test_properties_and_guards_are_quantifier_free() -> None:
    loaded = load_spec("raft")
    encoder = GroundEncoder(Vocabulary(loaded.info, SIZES))
    state = encoder.new_state("s")
    for prop in loaded.spec.properties():
        assert not _has_quantifier(encoder.formula(prop.formula, state, {})), prop.name
    for action in loaded.spec.actions():
        params = encoder.action_params(action, "@0")
        assert not _has_quantifier(encoder.guard(action, state, params)), action.name


def test_renaming_moves_a_formula_to_another_state() -> None:
    loaded = load_spec("raft")
    encoder = GroundEncoder(Vocabulary(loaded.info, SIZES))
    template, target = encoder.new_state("pre"), encoder.new_state("s3")
    prop = next(p for p in loaded.spec.properties() if p.name == "log_matching")
    moved = z3.substitute(
        encoder.formula(prop.formula, template, {}), *encoder.renaming("pre", "s3")
    )
    direct = encoder.formula(prop.formula, target, {})
    solver = z3.Solver()
    solver.add(*encoder.vocab.axioms(encoder), moved != direct)
    assert solver.check() == z3.unsat


def test_ground_encoder_needs_a_finite_instance() -> None:
    with pytest.raises(ValueError, match="finite"):
        GroundEncoder(Vocabulary(load_spec("mvcc").info))
