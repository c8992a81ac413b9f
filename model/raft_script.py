"""Data-driven cluster scripts: a list of commands in, a readable transcript out.

In the spirit of etcd raft's interaction tests: each line is one command, the transcript
echoes it (`> line`) and prints what it asks to show; an error is printed into the
transcript (`error: ...`) instead of being raised, so a golden test pins it too.
`ScriptSession` runs one command at a time (the golden runner's interpreter for the
model's cluster, tests/model/raft_scripts/); `run_script` runs a whole script.

Commands (node numbers are 1..N; a message is picked as the newest in flight that matches):
  timeout N | heartbeat N | tick N [COUNT] | persist N | crash N | restart N | compact N
  propose N KEY=VALUE | grant N LEASE_ID TTL | keepalive N LEASE_ID | read N KEY
  conf N OP M             leader N proposes a configuration change of node M; OP is
                          add, remove, learner (add as learner) or promote (membership)
  deliver SRC DST [TYPE] | drop SRC DST [TYPE] | duplicate SRC DST [TYPE]
  partition 1 2 | 3        (groups separated by "|")       heal
  stabilize               deliver (and persist) until nothing deliverable is left
  state                   one line per node        messages   the messages in flight
  committed               the entries known committed      check   check_invariants()
TYPE is a message type as printed (AppendEntries, RequestVoteResp, PreVote, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from etcdspec.model.actions import (
    Action,
    compact_log,
    conf_change,
    crash,
    deliver,
    drop,
    duplicate,
    heal,
    heartbeat,
    keepalive,
    partition,
    persist,
    propose,
    read_index,
    restart,
    tick,
    timeout,
)
from etcdspec.model.cluster import Cluster, IllegalActionError
from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.invariants import InvariantViolation
from etcdspec.model.raft_messages import CONF_OPS, Message
from etcdspec.model.raft_node import config_of
from etcdspec.model.requests import LeaseGrantRequest, PutRequest, RangeRequest


class ScriptError(ValueError):
    """A script line that cannot be run; the message says what was expected."""


class ScriptSession:
    """A fresh cluster driven one command at a time: `run(line)` gives what it shows.

    A command that fails with ScriptError, IllegalActionError or InvariantViolation shows
    `error: ...` and leaves the cluster as it was.
    """

    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.cluster = Cluster.start(config or ClusterConfig())

    def run(self, line: str) -> list[str]:
        try:
            self.cluster, shown = _command(self.cluster, line.strip())
        except (ScriptError, IllegalActionError, InvariantViolation) as error:
            return [f"error: {error}"]
        return shown


def run_script(lines: Iterable[str], config: ClusterConfig | None = None) -> tuple[str, Cluster]:
    """Run a script from a fresh cluster; returns the transcript and the final cluster."""
    session = ScriptSession(config)
    out: list[str] = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        out.append(f"> {line}")
        out.extend(session.run(line))
    return "\n".join(out), session.cluster


def _node(word: str, cluster: Cluster) -> int:
    if not word.isdigit() or not 1 <= int(word) <= len(cluster.nodes):
        raise ScriptError(f"expected a node number 1..{len(cluster.nodes)}, got {word!r}")
    return int(word)


def _find_message(cluster: Cluster, args: list[str]) -> Message:
    if len(args) < 2:
        raise ScriptError("expected SRC DST [TYPE]")
    src, dst = _node(args[0], cluster), _node(args[1], cluster)
    kind = args[2] if len(args) > 2 else None
    for message in reversed(cluster.messages):
        text = message.describe().split()
        if message.src == src and message.dst == dst and (kind is None or text[1] == kind):
            return message
    raise ScriptError(f"no message n{src}→n{dst} {kind or ''} in flight".replace("  ", " "))


_NODE_ACTIONS: dict[str, Callable[[int], Action]] = {
    "timeout": timeout,
    "heartbeat": heartbeat,
    "persist": persist,
    "crash": crash,
    "restart": restart,
    "compact": compact_log,
}


def _command(cluster: Cluster, line: str) -> tuple[Cluster, list[str]]:
    word, *args = line.split()
    if word in _NODE_ACTIONS:
        if len(args) != 1:
            raise ScriptError(f"{word} takes one node number")
        return cluster.apply(_NODE_ACTIONS[word](_node(args[0], cluster))), []
    if word == "tick":
        node = _node(args[0], cluster)
        count = int(args[1]) if len(args) > 1 else 1
        for _ in range(count):
            cluster = cluster.apply(tick(node))
        return cluster, []
    if word == "propose":
        if len(args) != 2 or "=" not in args[1]:
            raise ScriptError("propose takes a node and KEY=VALUE")
        key, value = args[1].split("=", 1)
        put = PutRequest(key.encode(), value.encode())
        return cluster.apply(propose(_node(args[0], cluster), put)), []
    if word == "conf":
        if len(args) != 3 or args[1] not in CONF_OPS:
            raise ScriptError(f"conf takes a node, one of {', '.join(CONF_OPS)}, and a node")
        change = conf_change(_node(args[0], cluster), args[1], _node(args[2], cluster))
        return cluster.apply(change), []
    if word == "grant":
        grant = LeaseGrantRequest(ttl=int(args[2]), id=int(args[1]))
        return cluster.apply(propose(_node(args[0], cluster), grant)), []
    if word == "keepalive":
        after = cluster.apply(keepalive(_node(args[0], cluster), int(args[1])))
        return after, [o.describe() for o in after.outputs]
    if word == "read":
        read = RangeRequest(args[1].encode())
        after = cluster.apply(read_index(_node(args[0], cluster), read))
        return after, [o.describe() for o in after.outputs]
    if word in ("deliver", "drop", "duplicate"):
        message = _find_message(cluster, args)
        make = {"deliver": deliver, "drop": drop, "duplicate": duplicate}[word]
        after = cluster.apply(make(message))
        return after, [o.describe() for o in after.outputs]
    if word == "partition":
        groups = [[_node(w, cluster) for w in part.split()] for part in " ".join(args).split("|")]
        return cluster.apply(partition(groups)), []
    if word == "heal":
        return cluster.apply(heal()), []
    if word == "stabilize":
        return _stabilize(cluster)
    if word == "state":
        return cluster, [_node_line(cluster, i) for i in range(1, len(cluster.nodes) + 1)]
    if word == "messages":
        return cluster, [m.describe() for m in cluster.messages] or ["(none)"]
    if word == "committed":
        return cluster, [" ".join(f"{i}/{t}:{k}" for i, t, k in cluster.committed()) or "(none)"]
    if word == "check":
        cluster.check_invariants()
        return cluster, ["ok"]
    raise ScriptError(f"unknown command {word!r}; see etcdspec.model.raft_script for the list")


def _stabilize(cluster: Cluster, limit: int = 1000) -> tuple[Cluster, list[str]]:
    shown: list[str] = []
    for _ in range(limit):
        actions = [a for a in cluster.enabled_actions() if a.kind in ("persist", "deliver")]
        if not actions:
            return cluster, shown
        cluster = cluster.apply(actions[0])
        cluster.check_invariants()
        shown.extend(o.describe() for o in cluster.outputs)
    raise ScriptError(f"stabilize: still busy after {limit} steps")


def _node_line(cluster: Cluster, node_id: int) -> str:
    node = cluster.node(node_id)
    parts = [node.name, node.role.describe(), f"term {node.term}"]
    if node.vote:
        parts.append(f"vote n{node.vote}")
    parts.append("log " + " ".join(str(e.term) for e in node.log.entries).join("[]"))
    if node.log.snapshot.last_index:
        parts.append(f"snapshot {node.log.snapshot.last_index}/{node.log.snapshot.last_term}")
    parts.append(f"commit {node.commit_index} applied {node.applied_index}")
    if node.durable is not None:
        parts.append(f"durable log {node.durable.log.last_index}")
    if not cluster.up[node_id - 1]:
        parts.append("DOWN")
    if cluster.config.membership:
        parts.append(f"config {config_of(cluster.params, node.log).describe()}")
    return " ".join(parts)
