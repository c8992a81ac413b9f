"""`etcdspec tour`: the guided tour of docs/tour.md, run step by step.

The tour is data (`TOUR`): each step says what to look at and why, the real `etcdspec`
command that shows it, the exit code that command gives and the shape of its output
(patterns that must be found in it). `etcdspec tour` runs every step in a work folder
(`--dir`, default `tour/`; the commands write their files there), prints each
command's output, checks its exit code and shape, and pauses between steps when stdin is
a terminal (`--no-pause` never). `--step N` runs one step, `--list` names them,
`--markdown` prints docs/tour.md (the committed file is this output; a test holds them
equal), `--show SPEC:ACTION` prints one action of a built-in spec (the tour's first
command). Exits 0 when every step ran with the expected exit code and shape, 1 when one
did not (it says which and what was missing), 2 on a usage error.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode


@dataclass(frozen=True)
class TourStep:
    """One step: a title, what to see (Markdown), the command and what it must give."""

    title: str
    text: str
    argv: tuple[str, ...]  # after `etcdspec`
    exit_code: int
    shape: tuple[str, ...]  # regular expressions, each found in stdout + stderr

    def command(self) -> str:
        return "etcdspec " + " ".join(self.argv)

    def describe(self) -> str:
        return f"{self.title}: $ {self.command()} (exit {self.exit_code})"


BMC_SIZES = "node=3,term=2,index=1,value=1,quorum=2"

RAFT_PATH: tuple[TourStep, ...] = (
    TourStep(
        "Read the rule",
        "The Raft spec (`spec/raft.spec`) is message-passing Raft in a small spec language: "
        "relations for each node's term, vote and log, the messages sent, and one action "
        "per protocol step. This is the leader's commit: it may mark index `i` committed "
        "once a quorum acknowledged it, and — the line labelled `current_term_rule` — only "
        "for an entry of its own term `t`. Raft's paper explains why with Figure 8. The "
        "mutation below the rule is the seeded bug that removes that line.",
        ("tour", "--show", "raft:commit"),
        0,
        (r"action commit\(", r"\[current_term_rule\] require et = t", r"mutation figure8"),
    ),
    TourStep(
        "Prove it",
        "Z3 proves every invariant inductive: it holds initially and every action keeps it, "
        "for any number of nodes, terms and entries. Each line is one (property, action) "
        "obligation; the last line sums them up.",
        ("prove", "raft"),
        0,
        (r"spec raft: holds — \d+ proved, 0 failed, 0 unknown",),
    ),
    TourStep(
        "Break the current-term commit rule",
        "Switch on the Figure 8 mutation and ask about Leader Completeness and the commit "
        "action alone. The prover answers with a counterexample to induction: a state "
        "where every property holds, one commit step, and a state where one fails — a "
        "leader of term 1 commits an entry of term 0 that a later leader's log lacks. Such "
        "a state need not be reachable; it shows which step breaks the argument.",
        (
            "prove",
            "raft",
            "--mutation",
            "figure8",
            "--only",
            "leader_completeness",
            "--action",
            "commit",
            "--itf",
            "cti.itf.json",
        ),
        1,
        (
            r"VIOLATED leader_completeness preserved by commit",
            r"counterexample to induction: safety leader_completeness is not preserved by commit",
            r"before \(all properties hold\)",
        ),
    ),
    TourStep(
        "A concrete run from bounded model checking",
        "BMC searches runs of up to K steps from the initial state on a small instance, so "
        "what it finds is reachable. BMC reaches the Figure 8 run (two elections, a lost "
        "append and a commit) only with `--rounds` and about 20 s of CPU (see docs/tour.md), "
        "so the tour uses a mutation it finds in a second: a node that grants a second vote "
        "in the same term. BMC answers with a run of at most K steps (one SAT query per bound, so "
        "not always the shortest): nodes time out, and one votes for two candidates in one "
        "term, which breaks a voting invariant.",
        (
            "prove",
            "raft",
            "--mutation",
            "two_votes",
            "--bmc",
            "5",
            "--size",
            BMC_SIZES,
            "--itf",
            "bmc.itf.json",
        ),
        1,
        (r"VIOLATED at depth \d+", r"violating run of \d+ step\(s\)", r"one_vote_per_term"),
    ),
    TourStep(
        "Draw BMC's run",
        "The ITF file BMC wrote, drawn: a lifeline per node, the vote requests as arrows, "
        "the step where the invariant breaks in red. Open `tour/bmc.html` in a browser; "
        "the arrow keys step through it.",
        ("diagram", "bmc.itf.json", "-o", "bmc.html"),
        0,
        (r"bmc\.html: \w+ violated", r"\(spec ITF \(BMC\)\)"),
    ),
    TourStep(
        "The model's explorer finds Figure 8 in the executable model",
        "The same rule broken in the executable Python model (the bug catalogue's "
        "`figure8_commit`): Hypothesis drives a 3-node cluster (timeouts, deliveries, "
        "partitions) until an invariant breaks, then shrinks the run. Read it from the "
        "bottom: a leader of term 3 commits the entry of term 1 by counting replicas, "
        "while n3's log of term 2 can still win an election.",
        (
            "explore",
            "--bug",
            "figure8_commit",
            "--itf",
            "figure8.itf.json",
            "--diagram",
            "figure8.html",
        ),
        1,
        (
            r"the finder of figure8_commit: .*bugs: figure8_commit",
            r"Counterexample: invariant \w+ violated after \d+ step\(s\) of the cluster model",
            r"diagram figure8\.html: written",
        ),
    ),
    TourStep(
        "Watch it as a diagram",
        "The explorer's run drawn from its ITF (the same page `--diagram` wrote): step "
        "through `tour/figure8.html` and watch n1 lose leadership with its term-1 entry "
        "unreplicated, n3 lead term 2, and n1 come back in term 3 and commit the old entry.",
        ("diagram", "figure8.itf.json", "-o", "figure8-again.html", "--text"),
        0,
        (r"Diagram: \w+ violated", r"VIOLATED: \w+", r"lifelines n1, n2, n3"),
    ),
    TourStep(
        "Replay the run on the spec's evaluator and the server's Raft core",
        "The same run, replayed on the two other layers. First the spec: the run is "
        "rebuilt from the model's config (in the ITF's `#meta`) and each step is checked "
        "on the spec's finite evaluator against `spec/raft_steps.spec`, the node-local "
        "Raft steps the model refines. Every step up to the commit is explained by spec "
        "actions (named per step: `pre_campaign`, `grant_vote`, `become_leader`, "
        "`leader_append`, ...); the commit is refused, and the spec names why: "
        "`advance_commit`'s `[current_term_rule]`, the very line the bug removes. Then "
        "the reference server's Raft core (impl/raft/, written apart from the model) "
        "takes the same run: each timeout, proposal and delivery is given to it, and "
        "after each step every node is compared with the model's. They agree through the "
        "first election, then differ: the core appends an empty entry of its own term "
        "when it becomes leader, as etcd does, and the model's Figure 8 finder runs "
        "without one. That entry is the practical fix for Figure 8: at the end the core's "
        "leader of term 3 commits index 2, an entry of its own term, and the older entry "
        "beneath it only with it; the model's leader commits an entry of term 1 alone. "
        "(`--on spec` or `--on impl` replays on one layer.)",
        ("replay", "figure8.itf.json"),
        1,
        (
            r"replayed (\d+) of \1 step\(s\) on the spec's evaluator \(raft_steps\.spec\): "
            r"\d+ agree; first difference at step \d+ \(differs\)",
            r"differs: no spec step explains it on n\d: plan .*advance_commit.*"
            r"\[current_term_rule\]",
            r"replayed (\d+) of \1 step\(s\) on the server's Raft core: \d+ agree; "
            r"first difference at step \d+ \(differs\)",
            r"model leader term 1 commit 0 log \[\], core leader term 1 commit 0 log \[1\]",
        ),
    ),
    TourStep(
        "The checker rejects a history from a server with a planted bug",
        "Now a real 3-member cluster of the reference server, with a planted bug "
        "(`local_linearizable_read`: an isolated member answers linearizable reads from "
        "its own stale state), under a client workload with network partitions. The "
        "history is recorded and checked: Linearizable fails, and the report folder has "
        "the timeline page of the failing read. Takes about half a minute.",
        (
            "conform",
            "--failpoints",
            "local_linearizable_read",
            "--faults",
            "partition",
            "--duration",
            "12s",
            "--clients",
            "6",
            "--rate",
            "80",
            "--keys",
            "3",
            "--fault-interval",
            "2",
            "--fault-hold",
            "2.5",
            "--seed",
            "1",
            "--report",
            "conform",
        ),
        1,
        (r"Linearizable",),
    ),
)

LEASE_PATH: tuple[TourStep, ...] = (
    TourStep(
        "Leases: what the spec says, and the nearest bug it refutes",
        "The same arc for a lease bug. The lease spec (`spec/lease.spec`) has one lessor "
        "and no replicas: expiring or revoking a lease deletes its keys in the same step, "
        "and time never passes a live lease's expiry (the lessor's checkpoint). The "
        "catalogue's lease bug — a deposed leader that revokes an expired lease by itself "
        "instead of through the log — lives in replication, below this spec's "
        "abstraction, so the spec has no mutation for it. Its nearest seeded bug, "
        "`no_checkpoint`, lets time pass a lease's expiry while keys are still attached; "
        "the prover refutes it: keys on a lease that expires now, then one tick.",
        (
            "prove",
            "lease",
            "--mutation",
            "no_checkpoint",
            "--only",
            "no_key_on_expired_lease",
            "--action",
            "advance",
        ),
        1,
        (
            r"VIOLATED no_key_on_expired_lease preserved by advance",
            r"counterexample to induction: safety no_key_on_expired_lease is not preserved",
        ),
    ),
    TourStep(
        "Leases: the explorer finds the stale leader's revoke",
        "The bug itself in the executable model (`lease_revoke_by_stale_leader`): a "
        "leader is cut off while its leases count down tick by tick, the others elect a "
        "new leader, and the old one, not yet knowing, revokes an expired lease in its "
        "own store. The replicas have applied the same entries and hold different stores, "
        "which the invariant AppliedStatesAgree refuses. `tour/lease.html` draws the run.",
        (
            "explore",
            "--bug",
            "lease_revoke_by_stale_leader",
            "--itf",
            "lease.itf.json",
            "--diagram",
            "lease.html",
        ),
        1,
        (
            r"Counterexample: invariant AppliedStatesAgree violated after \d+ step\(s\)",
            r"diagram lease\.html: written",
        ),
    ),
    TourStep(
        "Leases: the checker rejects the server's stale revoke",
        "The server's planted counterpart (`stale_leader_lease_revoke`: the leader applies "
        "an expired lease's revoke to its own state instead of proposing it through the "
        "log) under the leases workload, with 3-second leases that run out during the "
        "run. The members' stores part: reads at different members contradict each "
        "other, so Linearizable fails, and HashKV, when the members agree on a revision "
        "to compare, finds them different. Takes about ten seconds.",
        (
            "conform",
            "--failpoints",
            "stale_leader_lease_revoke",
            "--workload",
            "leases",
            "--faults",
            "none",
            "--duration",
            "6s",
            "--clients",
            "3",
            "--rate",
            "15",
            "--keys",
            "20",
            "--seed",
            "1",
            "--report",
            "conform-lease",
        ),
        1,
        (r"Linearizable +VIOLATED",),
    ),
)

WATCH_PATH: tuple[TourStep, ...] = (
    TourStep(
        "Watches: the explorer finds an event dropped at compaction",
        "A watch bug. No spec file states the watch guarantees: they are etcd's documented "
        "ones (Ordered, Unique, Reliable, Atomic, Resumable, Bookmarkable), stated in the "
        "model's store (`model/watch.py`) and checked by the checker on any history, so "
        "this arc starts at the model. The catalogue's `watch_drops_event_at_compaction`: "
        "a watcher catching up from a past revision across a compaction silently skips "
        "the compacted events instead of being told the revision is compacted. The store "
        "model's explorer finds it in four steps — two puts, a compaction, a watch from "
        "before it — and Resumable fails.",
        (
            "explore",
            "--bug",
            "watch_drops_event_at_compaction",
            "--itf",
            "watch.itf.json",
            "--diagram",
            "watch.html",
        ),
        1,
        (
            r"Counterexample: invariant Resumable violated after \d+ step\(s\) of the store",
            r"diagram watch\.html: written",
        ),
    ),
    TourStep(
        "Watches: the checker rejects the server's dropped event",
        "The server's planted sibling (`skip_watch_event_on_resume`: a watch created "
        "from a past revision drops the first event of its catch-up; the model's bug "
        "drops events only across a compaction, the server's on any catch-up, and both "
        "break the same guarantee). The watch workload opens watches from past revisions; "
        "the checker replays each watch stream against the linearized history and finds "
        "a stream that began later than asked: Resumable fails. No faults are needed; "
        "takes a few seconds.",
        (
            "conform",
            "--failpoints",
            "skip_watch_event_on_resume",
            "--workload",
            "watch",
            "--faults",
            "none",
            "--duration",
            "2s",
            "--seed",
            "1",
            "--report",
            "conform-watch",
        ),
        1,
        (r"Resumable +VIOLATED", r"skipping PUT"),
    ),
)

PARTS: tuple[tuple[str, tuple[TourStep, ...]], ...] = (
    ("A Raft bug: the current-term commit rule", RAFT_PATH),
    ("A lease bug: a stale leader's revoke", LEASE_PATH),
    ("A watch bug: an event dropped on resume", WATCH_PATH),
)
"""The tour's parts in order: a heading in docs/tour.md and its steps."""

TOUR: tuple[TourStep, ...] = tuple(step for _, steps in PARTS for step in steps)

BEYOND = (
    "`etcdspec replay` also takes runs with crashes, restarts and "
    "partitions (the core restarts from what its Readies persisted): `etcdspec explore "
    "--bug vote_not_persisted --itf vote.itf.json` then `etcdspec replay vote.itf.json` "
    "shows the model losing the vote at the crash while the core keeps it on disk and, "
    "restarted, refuses the second vote; the spec's evaluator refuses the model's crash "
    "step itself (the durable vote changed)."
)


def markdown() -> str:
    """docs/tour.md: the tour as a page, generated from TOUR."""
    lines = [
        "# A tour: from nothing to a counterexample, in four layers",
        "",
        "<!-- Generated by `etcdspec tour --markdown` from cli/tour.py; a test holds them equal. -->",
        "",
        "Run it all with `etcdspec tour` (it pauses between steps at a terminal; "
        "`--no-pause` runs straight through, `--step N` one step). Its files go to "
        "`tour/`. Every command below is run by a test that checks its exit code and the "
        "shape of its output.",
        "",
    ]
    number = 0
    for heading, steps in PARTS:
        lines += [f"## {heading}", ""]
        for step in steps:
            number += 1
            lines += [f"### {number}. {step.title}", "", step.text, "", "```console"]
            lines += [f"$ {step.command()}", "```", ""]
            meaning = {0: "holds", 1: "violation found"}.get(step.exit_code, "")
            lines += [f"It exits {step.exit_code} ({meaning}).", ""]
    lines += [
        "## Where the diagrams come from",
        "",
        "`etcdspec diagram FILE -o OUT.html` draws any counterexample: an ITF file from "
        "`explore --itf`, `prove --itf` (BMC), Apalache or Quint (Raft variables such as "
        "`currentTerm`, `state`, `log`, `messages` are recognised; other variables are "
        "drawn as a table per step, and the page says so), or the reference server's Raft "
        "traces (`serve --trace`, a directory of `*.trace.ndjson`), marked where trace "
        "validation fails. `explore --diagram OUT.html` draws its counterexample directly.",
        "",
        "## Why BMC shows a different bug",
        "",
        "Bounded model checking unrolls the spec K steps on a finite instance. The "
        "shortest Figure 8 run needs two elections, an append that reaches nobody, a "
        "re-election and a commit: 17 steps on a larger instance (5 terms, 2 indexes). "
        "Unrolled step by step, BMC does not finish it (no answer in 600 s). Unrolled in "
        "rounds, where each action fires at most once a round in the order the spec "
        "declares them, the 17 steps fit in 4 rounds: `etcdspec prove raft --mutation "
        "figure8 --only leader_completeness --bmc 4 --rounds --size "
        "node=3,term=5,index=2,value=1,quorum=1 --timeout 300 --itf f8.itf.json` finds "
        "it in about 18 s of CPU on the project's 2-core machine (issue 23; "
        "docs/benchmarks.md), too slow for a tour step. So the tour shows the double "
        "vote, which BMC finds in a second.",
        "",
        "## Replays with crashes, beyond the tour",
        "",
        BEYOND,
        "",
    ]
    return "\n".join(lines)


def show_action(target: str) -> str:
    """The source text of one action of a built-in spec, `SPEC:ACTION`."""
    from etcdspec.spec.errors import SpecLookupError
    from etcdspec.spec.loader import load_spec

    spec_name, _, action = target.partition(":")
    if not action:
        raise CliError("--show takes SPEC:ACTION, e.g. raft:commit", ExitCode.USAGE)
    try:
        loaded = load_spec(spec_name)
    except SpecLookupError as error:
        raise CliError(str(error), ExitCode.USAGE) from error
    path = Path(loaded.spec.filename)
    text = path.read_text(encoding="utf-8").splitlines()
    start = next(
        (i for i, line in enumerate(text) if re.match(rf"action {re.escape(action)}\(", line)),
        None,
    )
    if start is None:
        known = ", ".join(a.name for a in loaded.spec.actions())
        raise CliError(
            f"no action {action!r} in {spec_name} (its actions: {known})", ExitCode.USAGE
        )
    end = next(i for i in range(start, len(text)) if text[i] == "}")
    return "\n".join([f"# {path}, lines {start + 1}-{end + 1}", *text[start : end + 1]])


def run_step(step: TourStep, folder: Path) -> tuple[bool, str]:
    """Run one step's command in `folder`; (as expected?, its output). The command runs
    as its own process, as a reader would run it."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "etcdspec", *step.argv],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    output = done.stdout + done.stderr
    problems = []
    if done.returncode != step.exit_code:
        problems.append(f"exit {done.returncode}, expected {step.exit_code}")
    problems += [f"no match for {p!r}" for p in step.shape if not re.search(p, output)]
    return not problems, output + "".join(f"\n✗ {p}" for p in problems)


@click.command("tour")
@click.option("--dir", "folder", type=click.Path(path_type=Path), default=Path("tour"))
@click.option("--step", "only", type=int, default=None, help="Run only step N (1-based).")
@click.option("--list", "as_list", is_flag=True, help="List the steps and exit.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print docs/tour.md and exit.")
@click.option("--no-pause", is_flag=True, help="Never wait for Enter between steps.")
@click.option("--show", "show", default=None, help="Print one action of a spec (SPEC:ACTION).")
def tour(
    folder: Path,
    only: int | None,
    as_list: bool,
    as_markdown: bool,
    no_pause: bool,
    show: str | None,
) -> int:
    """Run the guided tour (docs/tour.md) step by step, checking each command's output."""
    if show is not None:
        click.echo(show_action(show))
        return int(ExitCode.HOLDS)
    if as_markdown:
        click.echo(markdown(), nl=False)
        return int(ExitCode.HOLDS)
    if as_list:
        for number, step in enumerate(TOUR, start=1):
            click.echo(f"{number}. {step.describe()}")
        return int(ExitCode.HOLDS)
    if only is not None and not 1 <= only <= len(TOUR):
        raise CliError(f"--step takes 1 to {len(TOUR)}", ExitCode.USAGE)
    chosen = [(only, TOUR[only - 1])] if only is not None else list(enumerate(TOUR, start=1))
    pause = not no_pause and sys.stdin.isatty()
    failed = []
    for number, step in chosen:
        click.echo(f"\n== {number}/{len(TOUR)}. {step.title}\n\n{step.text}\n\n$ {step.command()}")
        ok, output = run_step(step, folder)
        click.echo(output.rstrip())
        click.echo("✓ as the tour says" if ok else f"✗ step {number} did not go as the tour says")
        if not ok:
            failed.append(number)
        if pause and number != chosen[-1][0]:
            click.prompt("(Enter for the next step)", default="", show_default=False)
    if failed:
        click.echo(f"\nsteps not as described: {', '.join(map(str, failed))}", err=True)
        return int(ExitCode.VIOLATION)
    return int(ExitCode.HOLDS)
