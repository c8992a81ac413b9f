"""A counterexample of the model's cluster (ITF JSON) replayed on the spec's evaluator.

Contract
- `replay_on_spec(document)` rebuilds the run the ITF records: the cluster starts from
  the config in the ITF's `#meta` (`etcdspec-config`, written by `etcdspec explore
  --itf`), and each step's action is the one the model offers whose label is the step's
  label (a proposal's request is read from its label: `put(K=V)` or
  `lease_grant(ID, ttl T)`; other requests do not map). The rebuilt state is
  compared with the file's after every step; a step whose action cannot be rebuilt, or
  whose state differs from the file's, stops the replay there ("does not map", saying
  why): what follows would not be the file's run.
- Each step that maps is checked on spec/raft_steps.spec's finite evaluator, as
  `explore --refine` checks it (model/refinement_check.py): the acting node's abstract
  pre-state, the spec actions the step performs (its plan), each enabled, ending in the
  abstract post-state. A step `agrees` when it refines the spec (the detail names the
  spec actions, or a stutter), else it `differs`, naming the plan and the first failing
  `require` with its spec line. A difference does not stop the replay.
- Pure: no I/O besides reading the spec once; deterministic (the model is seeded by
  its config).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from etcdspec.itf import to_itf_value
from etcdspec.layer_replay import LayerReplay, ReplayStep
from etcdspec.model import actions
from etcdspec.model.actions import Action
from etcdspec.model.cluster import Cluster
from etcdspec.model.cluster_config import ConfigError, config_from_json
from etcdspec.model.hypothesis_cluster import abstract_state
from etcdspec.model.refinement_check import RefinementStats, RefinementViolation, check_step
from etcdspec.model.requests import LeaseGrantRequest, PutRequest

_PUT = re.compile(r"propose\(n(\d+), put\(([^=,()]*)=([^,()]*)\)\)")
_GRANT = re.compile(r"propose\(n(\d+), lease_grant\((auto|-?\d+), ttl (-?\d+)\)\)")


class SpecReplayInputError(ValueError):
    """An ITF document that is not a run of the model's cluster with its config."""


SpecReplayStep = ReplayStep  # one step of the run and how the spec's evaluator judged it


class SpecReplay(LayerReplay):
    """The replay of a run on the spec's evaluator."""

    LAYER = "the spec's evaluator (raft_steps.spec)"


def _state_of(state: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in state.items() if name != "#meta"}


def _as_file(cluster: Cluster) -> Any:
    """The cluster as the ITF file holds it (JSON round trip of the same encoding)."""
    return to_itf_value(abstract_state(cluster))


def _action_for(cluster: Cluster, label: str) -> Action | None:
    for action in cluster.enabled_actions():
        if action.describe() == label:
            return action
    put = _PUT.fullmatch(label)
    if put:
        node, key, value = put.groups()
        return actions.propose(int(node), PutRequest(key.encode(), value.encode()))
    grant = _GRANT.fullmatch(label)
    if grant:
        node, lease, ttl = grant.groups()
        lease_id = 0 if lease == "auto" else int(lease)
        return actions.propose(int(node), LeaseGrantRequest(int(ttl), lease_id))
    return None


def _cluster_from(document: Mapping[str, Any]) -> Cluster:
    states = document.get("states")
    meta = document.get("#meta")
    if not isinstance(states, list) or not states or not isinstance(meta, dict):
        raise SpecReplayInputError("not an ITF trace: it needs #meta and a list of states")
    if "etcdspec-config" not in meta:
        raise SpecReplayInputError(
            "the ITF's #meta has no etcdspec-config: replay on the spec rebuilds the run "
            "from the model's config, which `etcdspec explore --itf` writes (for a "
            "cluster-model counterexample)"
        )
    try:
        cluster = Cluster.start(config_from_json(meta["etcdspec-config"]))
    except (ConfigError, TypeError) as error:
        raise SpecReplayInputError(f"#meta etcdspec-config: {error}") from None
    if _as_file(cluster) != _state_of(states[0]):
        raise SpecReplayInputError(
            "the file's initial state is not the model's initial state for its config"
        )
    return cluster


def replay_on_spec(document: Mapping[str, Any]) -> SpecReplay:
    """See the module docstring."""
    cluster = _cluster_from(document)
    states = document["states"]
    steps: list[SpecReplayStep] = []
    stats = RefinementStats()
    for number, state in enumerate(states[1:], start=1):
        label = str(state.get("#meta", {}).get("action", ""))
        action = _action_for(cluster, label)
        if action is None:
            why = "the model offers no such step here (proposals: put and lease_grant only)"
            steps.append(SpecReplayStep(number, label, "does not map", why))
            break
        post = cluster.apply(action)
        if _as_file(post) != _state_of(state):
            why = "the rebuilt model's state is not the file's after this step"
            steps.append(SpecReplayStep(number, label, "does not map", why))
            break
        before = stats.actions.copy()
        stutters = stats.stutters
        try:
            check_step(cluster, action, post, stats)
        except RefinementViolation as violation:
            detail = f"no spec step explains it on {violation.node and f'n{violation.node}'}"
            detail += f": plan {violation.plan}; {violation.failed}"
            steps.append(SpecReplayStep(number, label, "differs", detail))
        else:
            done = stats.actions - before
            names = ", ".join(f"{name}×{n}" if n > 1 else name for name, n in sorted(done.items()))
            detail = f"spec: {names}" if names else "spec: stutter"
            if stats.stutters > stutters and names:
                detail += " (and stutters)"
            steps.append(SpecReplayStep(number, label, "agrees", detail))
        cluster = post
    return SpecReplay(tuple(steps), len(states) - 1)
