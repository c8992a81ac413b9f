"""The trace-validation stage of `etcdspec verify`: record Raft traces from a real
3-member cluster of our server under load with kill -9 and restart, and replay them on
the model (checker/trace_check.py).

Contract: `run_stage(options) -> StageResult` plans a traced cluster on free loopback
ports (frequent snapshots, so a restarted member may catch up from one) in
options.report_dir/trace, starts it, runs writer threads against every member, kills
the leader with SIGKILL mid-load, restarts it on its data, then a follower likewise
(with `options.quick` one kill, of the leader), waits for the cluster and a number of
taken writes after each step, stops every member with SIGTERM (the traces are flushed)
and runs `check_traces` over the trace files. Every process it started is stopped,
whatever happens.

Verdict: the replay's. A cluster that never became ready, a load that took too few
writes before its deadline, or a replay that checked too little (no restart, fewer
leader commits than writes asked for) is UNKNOWN, never a pass. The member logs and
traces are kept in the report folder; `details` holds the replay's counts.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from etcdspec.checker.trace_check import TraceResult, check_traces
from etcdspec.checker.trace_format import TraceFormatError
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher
from etcdspec.stage import StageOptions, StageResult
from etcdspec.verdict import Verdict

NAME = "trace"
FAILPOINTS_ENV = "ETCDSPEC_FAILPOINTS"  # read by our members (etcdspec.impl.failpoints)


@dataclass(frozen=True)
class TracePlan:
    """How much load and how many kills a stage run uses."""

    writers: int
    writes_per_phase: int
    kills: tuple[str, ...]  # "leader" or "follower", in order
    snapshot_count: int
    phase_timeout_s: float = 45.0

    def describe(self) -> str:
        return (
            f"{self.writers} writers, {self.writes_per_phase} writes a phase, kill -9 of "
            f"{', then '.join(self.kills)}, snapshots every {self.snapshot_count} entries"
        )


def stage_plan(quick: bool) -> TracePlan:
    if quick:
        return TracePlan(writers=3, writes_per_phase=25, kills=("leader",), snapshot_count=20)
    return TracePlan(
        writers=4, writes_per_phase=80, kills=("leader", "follower"), snapshot_count=40
    )


class LoadError(RuntimeError):
    """The cluster did not take the load in time (the stage is then UNKNOWN)."""


class Writers:
    """Writer threads putting unique keys through every member in turn; `taken` counts
    the writes the cluster acknowledged, and `wait_for` is woken by each of them."""

    def __init__(self, endpoints: list[str], writers: int) -> None:
        self.endpoints = endpoints
        self.taken = 0
        self._taken_changed = threading.Condition()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(writers)
        ]

    def _run(self, writer: int) -> None:
        sequence = 0
        channels = {e: grpc.insecure_channel(e.removeprefix("http://")) for e in self.endpoints}
        try:
            while not self._stop.is_set():
                for endpoint, channel in channels.items():
                    if self._stop.is_set():
                        break
                    key = f"trace/{writer}/{sequence}".encode()
                    sequence += 1
                    try:
                        rpc_pb2_grpc.KVStub(channel).Put(
                            rpc_pb2.PutRequest(key=key, value=endpoint.encode()), timeout=0.5
                        )
                    except grpc.RpcError:
                        continue
                    with self._taken_changed:
                        self.taken += 1
                        self._taken_changed.notify_all()
        finally:
            for channel in channels.values():
                channel.close()

    def wait_for(self, more: int, timeout_s: float) -> None:
        """Return once `more` further writes were taken; LoadError after `timeout_s`."""
        with self._taken_changed:
            goal = self.taken + more
            if not self._taken_changed.wait_for(lambda: self.taken >= goal, timeout_s):
                raise LoadError(f"only {self.taken} of {goal} writes taken in {timeout_s:g} s")

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)


def _leader(plan: launcher.ClusterPlan) -> str:
    statuses = launcher.wait_ready(plan.endpoints, timeout_s=30.0)
    leader = next(iter(statuses.values()))["leader"]
    for member in plan.members:
        if statuses[member.client_url]["member_id"] == leader:
            return member.name
    raise LoadError(f"the leader {leader:x} is none of the members")


def record_traces(
    directory: Path, trace_plan: TracePlan, env: dict[str, str] | None = None
) -> tuple[list[Path], int]:
    """Run the traced cluster under load with the planned kills; (trace files, writes).
    `env` goes to the members (e.g. ETCDSPEC_FAILPOINTS, to plant a bug)."""
    plan = launcher.plan_cluster(
        directory,
        3,
        heartbeat_ms=50,
        election_ms=500,
        snapshot_count=trace_plan.snapshot_count,
        trace=True,
    )
    program = launcher.ours_program()
    members: list[launcher.RunningMember] = []
    timeout = trace_plan.phase_timeout_s
    try:
        for member in plan.members:
            members.append(launcher.start_member(plan, member, program, env=env))
        launcher.wait_ready(plan.endpoints, timeout_s=60.0)
        with Writers(plan.endpoints, trace_plan.writers) as writers:
            for kill in trace_plan.kills:
                writers.wait_for(trace_plan.writes_per_phase, timeout)
                name = _leader(plan)
                if kill == "follower":
                    name = next(m.plan.name for m in members if m.plan.name != name)
                victim = next(m for m in members if m.plan.name == name)
                launcher.kill_member(victim)
                writers.wait_for(trace_plan.writes_per_phase, timeout)
                restarted = launcher.start_member(plan, victim.plan, program, "existing", env)
                members[members.index(victim)] = restarted
                launcher.wait_ready(plan.endpoints, timeout_s=60.0)
            writers.wait_for(trace_plan.writes_per_phase, timeout)
            taken = writers.taken
    finally:
        launcher.stop_members(members)
    return [launcher.trace_path(plan, member) for member in plan.members], taken


def judge(result: TraceResult, trace_plan: TracePlan) -> tuple[Verdict, str]:
    """The stage verdict: the replay's, UNKNOWN if it checked too little to mean much."""
    if result.verdict is not Verdict.TRUE:
        return result.verdict, result.failure.describe() if result.failure else "no replay"
    little = []
    if result.witness("restarts") < len(trace_plan.kills):
        little.append(f"{result.witness('restarts')} restarts")
    if result.witness("leader commits") < trace_plan.writes_per_phase:
        little.append(f"{result.witness('leader commits')} leader commits")
    if little:
        return Verdict.UNKNOWN, "the replay checked too little: " + ", ".join(little)
    return Verdict.TRUE, ""


def run_stage(options: StageOptions) -> StageResult:
    return run_trace_stage(options)


def run_trace_stage(options: StageOptions, failpoints: tuple[str, ...] = ()) -> StageResult:
    """The stage, optionally with planted bugs in the members (the tests' check that it
    can fail)."""
    started = time.monotonic()
    trace_plan = stage_plan(options.quick)
    directory = options.report_dir / NAME / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
    suffix = 0
    while directory.exists():
        suffix += 1
        directory = directory.with_name(f"run-{time.strftime('%Y%m%d-%H%M%S')}-{suffix}")
    details: dict[str, object] = {"plan": trace_plan.describe(), "report": str(directory)}
    if failpoints:
        details["failpoints"] = list(failpoints)
    env = {FAILPOINTS_ENV: ",".join(failpoints)} if failpoints else None
    try:
        paths, taken = record_traces(directory, trace_plan, env)
    except (LoadError, launcher.LauncherError) as error:
        return StageResult(
            NAME, Verdict.UNKNOWN, f"could not record: {error}", time.monotonic() - started, details
        )
    try:
        result = check_traces(list(paths))
    except TraceFormatError as error:
        return StageResult(
            NAME,
            Verdict.UNKNOWN,
            f"could not replay, a trace is malformed: {error}",
            time.monotonic() - started,
            details,
        )
    verdict, why = judge(result, trace_plan)
    details.update(result.to_json())
    details["writes"] = taken
    summary = (
        f"reference 3 members, {taken} writes, kill -9 of {' and '.join(trace_plan.kills)}: "
        f"{result.events} events replayed, {result.witness('leader commits')} leader commits, "
        f"{result.witness('restarts')} restarts"
    )
    if why:
        summary += f"; {why}"
    return StageResult(NAME, verdict, summary, time.monotonic() - started, details)
