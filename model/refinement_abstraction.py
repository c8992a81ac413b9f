"""The abstraction from the cluster model into spec/raft_steps.spec's vocabulary.

Contract
- `node_view(node, up)` is one node as the spec sees it (`NodeView`): current_term,
  vote, role, up, snapshot index/term, the log's entry terms after the snapshot,
  commit_index, a leader's acknowledged index per follower (match), the durable
  copy of term, vote and log, and with membership the voters of its configuration and
  of its durable log's (empty: no membership, every node votes). Nothing else of a
  node is visible to the spec.
- `spec_state(views, indices, nodes)` is the spec state of the given nodes over an
  index universe: one value per spec symbol (log_term and dlog_term as tables, term0
  at and below a snapshot and beyond a log's end).
- `make_instance(...)` is a finite `Instance`: contiguous term and index ranges (the
  index range may start above 0: a window over the live logs), the smallest
  majorities as quorums, node 0 standing for "nobody", and the rigid symbols of the
  message being received (sent_term, sent_commit, sent_last). Configurations are
  elements of the quorum sort (sets of nodes, by `member`). Without membership the only
  configuration is every node, added to the smallest majorities; with it
  (`membership=True`) the quorum sort is every non-empty set of nodes,
  and the instance says which is a majority of which (`majority`) and which differ by
  one voter at most (`adjacent`).
- `abstract_for_spec(cluster)` is the whole cluster abstracted, with an instance that
  covers it; `raft_steps_spec()` is the spec, parsed and type-checked once.
- Pure functions of their arguments, no I/O besides reading the spec file once.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from etcdspec.model.cluster import Cluster
from etcdspec.model.raft_messages import node_name
from etcdspec.model.raft_node import Node, RaftParams, Role, config_of
from etcdspec.spec.evaluator import Instance
from etcdspec.spec.loader import SPEC_DIR, LoadedSpec, load_spec

SPEC_PATH = SPEC_DIR / "raft_steps.spec"
NOBODY = 0
ROLE_NAMES = {
    Role.FOLLOWER: "follower",
    Role.PRE_CANDIDATE: "precandidate",
    Role.CANDIDATE: "candidate",
    Role.LEADER: "leader",
}
ROLES = ("follower", "precandidate", "candidate", "leader")
NODE_SYMBOLS = (
    "current_term",
    "vote",
    "role",
    "snap_index",
    "snap_term",
    "last_index",
    "commit_index",
    "dterm",
    "dvote",
    "dsnap_index",
    "dsnap_term",
    "dlast_index",
    "config",
    "dconfig",
)


@lru_cache(maxsize=1)
def raft_steps_spec() -> LoadedSpec:
    """The step-level spec, parsed and type-checked once."""
    return load_spec(str(SPEC_PATH))


class NodeView(NamedTuple):
    """One node in the spec's vocabulary (log: the entry terms after the snapshot)."""

    term: int
    vote: int
    role: str
    up: bool
    snap_index: int
    snap_term: int
    log: tuple[int, ...]
    commit_index: int
    dterm: int
    dvote: int
    dsnap_index: int
    dsnap_term: int
    dlog: tuple[int, ...]
    match: tuple[int, ...] = ()  # a leader's acked index per node (position id-1); () none
    config: frozenset[int] = frozenset()  # membership: the voters (empty: every node)
    dconfig: frozenset[int] = frozenset()  # membership: the durable log's voters

    @property
    def last_index(self) -> int:
        return self.snap_index + len(self.log)

    @property
    def dlast_index(self) -> int:
        return self.dsnap_index + len(self.dlog)

    def describe(self) -> str:
        vote = node_name(self.vote) if self.vote else "none"
        state = "up" if self.up else "down"
        log = " ".join(str(t) for t in self.log)
        dlog = " ".join(str(t) for t in self.dlog)
        return (
            f"{self.role} term {self.term} vote {vote} {state} "
            f"log [snap {self.snap_index}/{self.snap_term}] [{log}] commit {self.commit_index}; "
            f"durable term {self.dterm} vote {node_name(self.dvote) if self.dvote else 'none'} "
            f"log [snap {self.dsnap_index}/{self.dsnap_term}] [{dlog}]"
            + (f"; acks {list(self.match)}" if any(self.match) else "")
            + (f"; voters {_nodes_text(self.config)}" if self.config else "")
            + (
                f"; durable voters {_nodes_text(self.dconfig)}"
                if self.dconfig != self.config
                else ""
            )
        )

    def acked(self, node: int) -> int:
        return self.match[node - 1] if self.match else 0

    def durable_holds(self, index: int) -> bool:
        """The durable log holds the in-memory log's entry at `index`."""
        if index > self.dlast_index or index > self.last_index:
            return False
        memory = _log_terms(self.snap_index, self.log, range(index, index + 1))[0]
        durable = _log_terms(self.dsnap_index, self.dlog, range(index, index + 1))[0]
        return memory == durable


def _nodes_text(nodes: frozenset[int]) -> str:
    return ",".join(node_name(n) for n in sorted(nodes))


def node_view(node: Node, up: bool, params: RaftParams | None = None) -> NodeView:
    """One node as the spec sees it (`params` with membership: its configurations too)."""
    log = node.log
    hard = node.hard_state()
    terms = tuple(e.term for e in log.entries)
    config: frozenset[int] = frozenset()
    dconfig: frozenset[int] = frozenset()
    if params is not None and params.membership:
        config = config_of(params, log).voters
        dconfig = config if hard.log is log else config_of(params, hard.log).voters
    return NodeView(
        term=node.term,
        vote=node.vote,
        role=ROLE_NAMES[node.role],
        up=up,
        snap_index=log.snapshot.last_index,
        snap_term=log.snapshot.last_term,
        log=terms,
        commit_index=node.commit_index,
        dterm=hard.term,
        dvote=hard.vote,
        dsnap_index=hard.log.snapshot.last_index,
        dsnap_term=hard.log.snapshot.last_term,
        dlog=terms if hard.log is log else hard.log.terms(),
        match=node.match if any(node.match) else (),
        config=config,
        dconfig=dconfig,
    )


def cluster_views(cluster: Cluster) -> tuple[NodeView, ...]:
    params = cluster.params
    return tuple(node_view(node, cluster.up[node.id - 1], params) for node in cluster.nodes)


def _view_value(view: NodeView, symbol: str) -> Any:
    if symbol == "last_index":
        return view.last_index
    if symbol == "dlast_index":
        return view.dlast_index
    if symbol == "dterm":
        return view.dterm
    if symbol in ("config", "dconfig"):
        return getattr(view, symbol)  # empty: every node (spec_state fills it in)
    return getattr(view, "term" if symbol == "current_term" else symbol)


def _log_terms(snap_index: int, log: tuple[int, ...], indices: range) -> list[int]:
    """The normalised log: term0 at and below the snapshot and beyond the end."""
    last = snap_index + len(log)
    return [log[j - snap_index - 1] if snap_index < j <= last else 0 for j in indices]


def spec_state(views: Mapping[int, NodeView], indices: range, nodes: int) -> dict[str, Any]:
    """The spec state of the given nodes (by id) over an index universe, in a cluster
    of `nodes` nodes."""
    state: dict[str, Any] = {name: {} for name in NODE_SYMBOLS}
    state["up"] = {n for n, view in views.items() if view.up}
    every = frozenset(range(1, nodes + 1))
    log_term: dict[tuple[int, int], int] = {}
    dlog_term: dict[tuple[int, int], int] = {}
    for n, view in views.items():
        for name in NODE_SYMBOLS:
            value = _view_value(view, name)
            state[name][n] = value if value or name not in ("config", "dconfig") else every
        for j, t in zip(indices, _log_terms(view.snap_index, view.log, indices), strict=True):
            log_term[(n, j)] = t
        for j, t in zip(indices, _log_terms(view.dsnap_index, view.dlog, indices), strict=True):
            dlog_term[(n, j)] = t
    state["log_term"] = log_term
    state["match"] = {
        (n, m): view.acked(m) for n, view in views.items() for m in range(1, nodes + 1)
    }
    state["dlog_term"] = dlog_term
    return state


@lru_cache(maxsize=8)
def quorums(nodes: int) -> tuple[frozenset[int], ...]:
    """The smallest majorities of nodes 1..nodes (larger ones add nothing to a check)."""
    size = nodes // 2 + 1
    return tuple(frozenset(c) for c in itertools.combinations(range(1, nodes + 1), size))


def config_quorums(voters: frozenset[int]) -> tuple[frozenset[int], ...]:
    """The smallest majorities of a configuration's voters."""
    size = len(voters) // 2 + 1
    return tuple(frozenset(c) for c in itertools.combinations(sorted(voters), size))


@lru_cache(maxsize=8)
def _membership_universe(nodes: int) -> dict[str, Any]:
    """Configurations and quorums: every non-empty set of nodes, with who is a member of
    which, which is a majority of which, and which differ by at most one voter."""
    sets = tuple(
        frozenset(c)
        for size in range(1, nodes + 1)
        for c in itertools.combinations(range(1, nodes + 1), size)
    )
    return {
        "sets": sets,
        "member": {(m, q) for q in sets for m in q},
        "majority": {(q, c) for q in sets for c in sets if q <= c and 2 * len(q) > len(c)},
        "adjacent": {(a, b) for a in sets for b in sets if len(a ^ b) <= 1},
    }


def make_instance(
    nodes: int,
    max_term: int,
    max_index: int,
    sent: Mapping[int, int] | None = None,
    sent_commit: int = 0,
    sent_last: int = 0,
    node_ids: Sequence[int] | None = None,
    min_index: int = 0,
    membership: bool = False,
) -> Instance:
    """Contiguous term and index ranges (the spec's next_index / next_term need them);
    node 0 is "nobody" (a rigid value outside the universe); `sent` gives the entry
    terms of the message being received. `min_index` starts the index range above 0
    (a window over the live part of the logs, see check_plan)."""
    indices = range(min_index, max_index + 1)
    sent = sent or {}
    ids = list(range(1, nodes + 1)) if node_ids is None else list(node_ids)
    every = frozenset(range(1, nodes + 1))
    if not membership:
        smallest = quorums(nodes)
        sets: Any = smallest if every in smallest else (*smallest, every)
        member = {(m, q) for q in sets for m in q}
        configs = {
            "majority": {(q, every) for q in sets},
            "adjacent": {(every, every)},
        }
    else:
        universe = _membership_universe(nodes)
        sets = universe["sets"]
        member = universe["member"]
        configs = {
            "majority": universe["majority"],
            "adjacent": universe["adjacent"],
        }
    return Instance(
        universes={
            "node": ids,
            "role": ROLES,
            "quorum": sets,
            "term": range(max_term + 1),
            "index": indices,
        },
        rigid={
            "nobody": NOBODY,
            "term0": 0,
            "index0": 0,
            "follower": "follower",
            "precandidate": "precandidate",
            "candidate": "candidate",
            "leader": "leader",
            "sent_term": {j: sent.get(j, 0) for j in indices},
            "sent_commit": sent_commit,
            "sent_last": sent_last,
            "member": member,
            **configs,
        },
    )


def view_bounds(views: Sequence[NodeView]) -> tuple[int, int]:
    """The largest term and index the views hold: what an instance must cover."""
    max_term = max(
        [0, *(max(v.term, v.dterm, v.snap_term, v.dsnap_term, *v.log, *v.dlog) for v in views)]
    )
    max_index = max([0, *(max(v.last_index, v.dlast_index, v.commit_index) for v in views)])
    return max_term, max_index


def abstract_for_spec(cluster: Cluster) -> tuple[dict[str, Any], Instance]:
    """The whole cluster in raft_steps vocabulary, with an instance that covers it."""
    views = cluster_views(cluster)
    max_term, max_index = view_bounds(views)
    membership = cluster.params.membership
    instance = make_instance(len(views), max_term, max_index, membership=membership)
    by_id = {position + 1: view for position, view in enumerate(views)}
    return spec_state(by_id, range(max_index + 1), len(views)), instance
