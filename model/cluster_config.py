"""The cluster simulator's configuration: size, seed, bugs, timing, bounds, workload.

Contract
- `ClusterConfig` is a frozen dataclass; constructing one that cannot be simulated
  raises `ConfigError`, whose message says what to change. Nothing else checks it.
- `params()` gives the per-node Raft parameters (model/raft_node.py's `RaftParams`);
  the rest (bounds, which faults are offered, the proposals and reads a leader is
  offered, `lease_tick_scale`) is the cluster's (model/cluster.py).
- Bounds (`max_term`, `max_log`, `max_messages`, `max_crashes`) are None for
  unbounded; a step that would leave them is not enabled.
- `describe()` is the one text of a config used by reports and errors.
- `membership=True` offers configuration changes (add, remove, add as learner,
  promote) at a leader; the node universe stays 1..N (finite for the explorer) and the
  first `voters` nodes start as the configuration (default with membership: all but
  the last node, which starts outside; without membership every node is a voter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from etcdspec.model.bugs import NO_BUGS, BugSet
from etcdspec.model.raft_node import RaftParams
from etcdspec.model.requests import PutRequest, RangeRequest


class ConfigError(ValueError):
    """A cluster configuration that cannot be simulated; the message says what to change."""


@dataclass(frozen=True)
class ClusterConfig:
    nodes: int = 3
    seed: int = 0
    bugs: BugSet = NO_BUGS
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    prevote: bool = True
    check_quorum: bool = True
    timeouts: str = "ticks"  # "ticks": counted with randomized timeouts; "free": timeout(n)
    max_term: int | None = None
    max_log: int | None = None
    max_messages: int | None = None
    lossy_overflow: bool = False  # with max_messages: a message sent into a full network is
    # lost (a real network behaviour) instead of the step being out of bounds
    max_snapshot_lag: int = 1  # compact_log(n) is offered once this many applied entries
    # lie beyond the node's snapshot
    persist: str = "explicit"  # "explicit": persist(n) is a step; "sync": every step persists
    noop_on_leader: bool = True
    max_crashes: int | None = None
    allow_drop: bool = True
    allow_duplicate: bool = True
    allow_partition: bool = True
    allow_compaction: bool = True
    allow_heartbeat: bool = True  # free mode: offer heartbeat(n) (a leader resends appends)
    proposals: tuple[Any, ...] = field(default_factory=lambda: (PutRequest(b"k", b"v"),))
    reads: tuple[Any, ...] = field(default_factory=lambda: (RangeRequest(b"k"),))
    lease_tick_scale: int = 1
    membership: bool = False  # configuration changes are offered (see the docstring)
    voters: int | None = None  # membership: how many nodes start as voters (None: N-1)
    etcd_heartbeats: bool = False  # heartbeats as etcd raft's (RaftParams.etcd_heartbeats)
    max_append_entries: int = 0  # entries per AppendEntries at most (0: every pending one)

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ConfigError(f"nodes must be at least 1, got {self.nodes}; use 3 or 5")
        if self.timeouts not in ("ticks", "free"):
            raise ConfigError(f"timeouts must be 'ticks' or 'free', got {self.timeouts!r}")
        if self.persist not in ("explicit", "sync"):
            raise ConfigError(f"persist must be 'explicit' or 'sync', got {self.persist!r}")
        if self.election_ticks < 1 or self.heartbeat_ticks < 1:
            raise ConfigError("election_ticks and heartbeat_ticks must be at least 1")
        if self.heartbeat_ticks >= self.election_ticks:
            raise ConfigError(
                f"heartbeat_ticks ({self.heartbeat_ticks}) must be below election_ticks "
                f"({self.election_ticks}), as etcd requires"
            )
        if self.voters is not None and not self.membership:
            raise ConfigError("voters needs membership=True (without it every node votes)")
        if self.voters is not None and not 1 <= self.voters <= self.nodes:
            raise ConfigError(
                f"voters must be between 1 and nodes ({self.nodes}), got {self.voters}"
            )
        if self.max_append_entries < 0:
            raise ConfigError(
                f"max_append_entries must be >= 0 (0: no limit), got {self.max_append_entries}"
            )
        for name in ("max_term", "max_log", "max_messages", "max_crashes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name} must be >= 0 or None, got {value}")

    def params(self) -> RaftParams:
        return RaftParams(
            nodes=self.nodes,
            election_ticks=self.election_ticks,
            heartbeat_ticks=self.heartbeat_ticks,
            prevote=self.prevote,
            check_quorum=self.check_quorum,
            free_timeouts=self.timeouts == "free",
            explicit_persist=self.persist == "explicit",
            noop_on_leader=self.noop_on_leader,
            seed=self.seed,
            bugs=self.bugs,
            membership=self.membership,
            initial_voters=self.initial_voters(),
            etcd_heartbeats=self.etcd_heartbeats,
            max_append_entries=self.max_append_entries,
        )

    def initial_voters(self) -> frozenset[int]:
        """The first configuration's voters (empty without membership: all nodes)."""
        if not self.membership:
            return frozenset()
        count = self.voters if self.voters is not None else max(1, self.nodes - 1)
        return frozenset(range(1, count + 1))

    def describe(self) -> str:
        bounds = ", ".join(
            f"{name}={getattr(self, name)}"
            for name in ("max_term", "max_log", "max_messages", "max_crashes")
            if getattr(self, name) is not None
        )
        return (
            f"{self.nodes} nodes, seed {self.seed}, timeouts {self.timeouts}, persist "
            f"{self.persist}, prevote {self.prevote}, check_quorum {self.check_quorum}, "
            f"bugs {self.bugs.describe()}"
            + (f", {bounds}" if bounds else "")
            + (f", membership from voters {len(self.initial_voters())}" if self.membership else "")
        )


_SCALAR_FIELDS = (
    "nodes",
    "seed",
    "election_ticks",
    "heartbeat_ticks",
    "prevote",
    "check_quorum",
    "timeouts",
    "max_term",
    "max_log",
    "max_messages",
    "lossy_overflow",
    "max_snapshot_lag",
    "persist",
    "noop_on_leader",
    "max_crashes",
    "allow_drop",
    "allow_duplicate",
    "allow_partition",
    "allow_compaction",
    "allow_heartbeat",
    "lease_tick_scale",
    "membership",
    "voters",
)


def config_to_json(config: ClusterConfig) -> dict[str, Any]:
    """The config as plain JSON (written into a counterexample's ITF `#meta`, so that the
    run can be rebuilt: `etcdspec replay --on spec`). The offered proposals and reads are
    left out: a replay takes each step's own request from its label."""
    document: dict[str, Any] = {name: getattr(config, name) for name in _SCALAR_FIELDS}
    document["bugs"] = sorted(config.bugs.names)
    return document


def config_from_json(document: Any) -> ClusterConfig:
    """The config `config_to_json` wrote; ConfigError (what is wrong) for anything else."""
    if not isinstance(document, dict):
        raise ConfigError(f"a cluster config is a JSON object, got {type(document).__name__}")
    unknown = sorted(set(document) - {*_SCALAR_FIELDS, "bugs"})
    if unknown:
        raise ConfigError(f"unknown cluster config field(s) {', '.join(unknown)}")
    fields = {name: document[name] for name in _SCALAR_FIELDS if name in document}
    try:
        bugs = BugSet.of(*document.get("bugs", []))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return ClusterConfig(bugs=bugs, **fields)
