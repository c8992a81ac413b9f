"""Data-driven golden tests of the server's Raft core (etcdspec.impl.raft, driven by the
simulator in tests/support/impl_raft_sim.py): transcripts in
tests/impl/raft/raft_scripts/*.txt, run by tests/support/golden.py. Under each `> command`
is its expected output: the simulator's event log for that command (role changes, messages
sent and delivered, entries applied, read states), or `ok` when it logged nothing. Run with
--rewrite-golden to rewrite the expectations (then review the diff: it is the behaviour
being signed off).

Commands:
    cluster <n> [seed=S] [pre_vote=0|1] [check_quorum=0|1] [inflight=N] [max_bytes=N]
            [election=ticks]
    campaign <id> | tick <id> [times] | tick-all [times] | propose <id> <data>
    read-index <id> <context> | transfer <leader> <target> | compact <id>
    deliver [max]  (in order)  | drop [to=<id>] | partition <ids> | <ids> ... | heal
    crash <id> | restart <id> | status
    add-node <id> [voters=1,2,3] [learners=4]   (a node that joins; empty: no config)
    conf-change <leader> add-learner|add|remove|update <id>   (its refusal is printed)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden import run_golden
from impl_raft_sim import Cluster

from etcdspec.impl.raft.messages import ConfChange, ConfChangeRefused, ConfChangeType

CONF_CHANGES = {
    "add-learner": ConfChangeType.ADD_LEARNER_NODE,
    "add": ConfChangeType.ADD_NODE,
    "remove": ConfChangeType.REMOVE_NODE,
    "update": ConfChangeType.UPDATE_NODE,
}

SCRIPTS = sorted((Path(__file__).parent / "raft_scripts").glob("*.txt"))


class Interpreter:
    """The golden runner's interpreter for the Raft core: one simulated cluster."""

    def __init__(self) -> None:
        self.cluster: Cluster | None = None

    @property
    def c(self) -> Cluster:
        if self.cluster is None:
            raise ValueError("the script must start with `cluster <n>`")
        return self.cluster

    def run(self, command: str) -> list[str]:
        words = command.split()
        name, args = words[0], words[1:]
        mark = len(self.cluster.log) if self.cluster is not None else 0
        handler = getattr(self, "cmd_" + name.replace("-", "_"), None)
        if handler is None:
            raise ValueError(f"unknown command {name!r}")
        extra = handler(args)
        out = self.c.log[mark:] if name != "cluster" else []
        if extra:
            out = [*out, *extra]
        return out or ["ok"]

    def cmd_cluster(self, args: list[str]) -> list[str]:
        options = dict(a.split("=") for a in args[1:])
        self.cluster = Cluster(
            int(args[0]),
            seed=int(options.get("seed", 0)),
            pre_vote=options.get("pre_vote", "1") == "1",
            check_quorum=options.get("check_quorum", "1") == "1",
            max_inflight_msgs=int(options.get("inflight", 256)),
            max_size_per_msg=int(options.get("max_bytes", 1 << 20)),
            election_tick=int(options.get("election", 10)),
            record_events=True,
        )
        return []

    def cmd_campaign(self, args: list[str]) -> None:
        self.c.campaign(int(args[0]))

    def cmd_tick(self, args: list[str]) -> None:
        self.c.tick(int(args[0]), int(args[1]) if len(args) > 1 else 1)

    def cmd_tick_all(self, args: list[str]) -> None:
        self.c.tick_all(int(args[0]) if args else 1)

    def cmd_propose(self, args: list[str]) -> list[str]:
        accepted = self.c.propose(int(args[0]), args[1].encode())
        return [] if accepted else ["proposal dropped"]

    def cmd_read_index(self, args: list[str]) -> list[str]:
        accepted = self.c.read_index(int(args[0]), args[1].encode())
        return [] if accepted else ["read dropped"]

    def cmd_transfer(self, args: list[str]) -> None:
        self.c.transfer_leader(int(args[0]), int(args[1]))

    def cmd_compact(self, args: list[str]) -> list[str]:
        return [] if self.c.compact(int(args[0])) else ["nothing to compact"]

    def cmd_deliver(self, args: list[str]) -> None:
        budget = int(args[0]) if args else 10_000
        while self.c.network and budget > 0:
            self.c.deliver(0)
            budget -= 1

    def cmd_drop(self, args: list[str]) -> list[str]:
        to = int(args[0].split("=")[1]) if args else None
        kept = [m for m in self.c.network if to is not None and m.to != to]
        dropped = len(self.c.network) - len(kept)
        self.c.network = kept
        return [f"dropped {dropped} messages"]

    def cmd_partition(self, args: list[str]) -> None:
        groups = " ".join(args).split("|")
        self.c.partition(*({int(x) for x in g.split()} for g in groups))

    def cmd_heal(self, args: list[str]) -> None:
        self.c.heal()

    def cmd_crash(self, args: list[str]) -> None:
        self.c.crash(int(args[0]))

    def cmd_restart(self, args: list[str]) -> None:
        self.c.restart(int(args[0]))

    def cmd_status(self, args: list[str]) -> list[str]:
        return self.c.describe().splitlines()

    def cmd_add_node(self, args: list[str]) -> None:
        options = dict(a.split("=") for a in args[1:])

        def ids(name: str) -> tuple[int, ...]:
            return tuple(int(x) for x in options.get(name, "").split(",") if x)

        self.c.add_node(int(args[0]), ids("voters"), ids("learners"))

    def cmd_conf_change(self, args: list[str]) -> list[str]:
        if args[1] not in CONF_CHANGES:
            raise ValueError(f"conf-change: unknown kind {args[1]!r}; one of {list(CONF_CHANGES)}")
        cc = ConfChange(CONF_CHANGES[args[1]], int(args[2]))
        try:
            self.c.driver(int(args[0])).propose_conf_change(cc)
        except ConfChangeRefused as refused:
            return [f"refused: {refused.reason}"]
        self.c.log.append(f"{args[0]} proposes {cc.describe()}")
        self.c.process(int(args[0]))
        return []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_golden_script(script: Path, rewrite_golden: bool) -> None:
    run_golden(script, Interpreter, rewrite=rewrite_golden)


def test_golden_scripts_exist() -> None:
    assert len(SCRIPTS) >= 4
