"""`etcdspec conform` as a library call: start (or reach) a target, run a workload with
faults while recording, check the history, compare HashKV, write the report folder.

Contract:
- `run_conform(options) -> ConformResult`. The report folder is
  REPORT/<run id>/ with history.jsonl, faults.jsonl, result.json, timeline.html
  (the checker's report, with the conformance facts added under "conform" and the
  HashKV comparison as one more check) and, for local clusters, cluster/ with the
  member logs; the data dirs are removed when the run holds and kept otherwise.
  REPORT/latest points at the newest run.
- Verdict: the checker's verdict merged with HashKV agreement (every member's
  HashKV at one revision, same compact revision, same hash) and the run's further
  checks (`more_checks`): when a disk fault ran, DiskFaults (conform/disk_faults.py);
  with `hashkv_across`, "HashKV across targets" (conform/hash_across.py: after the run,
  the same seeded writes on a fresh member of ours and of real etcd, HashKV compared
  after each); with a membership fault (replace-member, learner), Membership
  (checker/membership.py: each member's Status polled through the run by
  conform/leader_watch.py, no two leaders in one term, the final member list the one
  the changes left; the observations and changes in membership.jsonl). A timeout or a
  member that never catches up is UNKNOWN, never a pass.
- A target that already holds data is read once before the workload and its state
  recorded as the history's first operations (conform/initial.py); the run
  then reads and watches nothing from before that revision. Nobody else may write to
  the target during the run.
- An unreachable target raises TargetError (exit 5); every process and proxy the run
  started is stopped, whatever happens.
- Progress (ops/s, faults as they happen) goes to `options.progress` (stderr in the CLI).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from etcdspec.checker.check import CheckOptions, CheckReport, check_history
from etcdspec.checker.history import build_history
from etcdspec.checker.membership import MemberChange, check_membership
from etcdspec.checker.report import write_report
from etcdspec.checker.results import CheckResult
from etcdspec.conform.consistency import hashkv_agreement
from etcdspec.conform.faults import FaultInjector
from etcdspec.conform.hash_across import hashkv_across
from etcdspec.conform.initial import InitialRecord, InitialStateError, capture
from etcdspec.conform.leader_watch import LeaderWatch, final_member_lists
from etcdspec.conform.recorder import (
    Process,
    Recorder,
    RecordingClient,
    WatchRecorder,
)
from etcdspec.conform.secure import ClientSecurity
from etcdspec.conform.targets import (
    FUSE_FAULTS,
    SNAPSHOT_COUNT,
    SNAPSHOT_FAULT_COUNT,
    LocalCluster,
    Target,
    TargetError,
    make_target,
)
from etcdspec.conform.workloads import (
    Worker,
    WorkloadError,
    make_workload,
    watch_floor,
    workload_owns_auth,
)
from etcdspec.exitcodes import ExitCode
from etcdspec.model.watch import WatchRequest
from etcdspec.verdict import Verdict


@dataclass(frozen=True)
class ConformOptions:
    report_dir: Path
    target: str = "reference"
    endpoints: tuple[str, ...] = ()
    etcd_bin: str | None = None
    workload: str = "etcd-kv"
    faults: tuple[str, ...] = ("kill", "partition")
    duration_s: float = 20.0
    seed: int = 0
    members: int = 3
    clients: int = 4
    rate: float = 40.0  # operations per second over all clients
    keys: int = 6
    fault_interval_s: float = 3.0
    fault_hold_s: float = 1.5
    request_timeout_s: float = 2.0
    check_timeout_s: float = 120.0
    failpoints: tuple[str, ...] = ()  # planted bugs switched on in our members
    hashkv_across: bool = False  # also compare HashKV of ours and etcd on seeded writes
    security: ClientSecurity | None = None  # --endpoints over TLS, with a user (conform.secure)
    secure: bool = False  # the local target with TLS and auth (conform.targets.LocalCluster)
    progress: Callable[[str], None] | None = None

    def describe(self) -> str:
        target = f"endpoints {','.join(self.endpoints)}" if self.endpoints else self.target
        planted = f", failpoints {','.join(self.failpoints)}" if self.failpoints else ""
        if self.secure:
            planted += ", with TLS and auth"
        elif self.security is not None:
            planted += f", over {self.security.describe()}"
        return (
            f"conform {target} workload {self.workload} faults "
            f"{','.join(self.faults) or 'none'} for {self.duration_s:g} s, seed {self.seed}"
            f"{planted}"
        )


@dataclass(frozen=True)
class ConformResult:
    verdict: Verdict
    run_dir: Path
    check: CheckReport | None
    hashkv: CheckResult
    faults: tuple[str, ...]
    skipped_faults: tuple[str, ...]
    counts: dict[str, int]
    seconds: float
    notes: tuple[str, ...] = field(default=())
    initial: InitialRecord | None = None
    more_checks: tuple[CheckResult, ...] = ()  # DiskFaults, HashKV across targets

    def more_check(self, name: str) -> CheckResult | None:
        """The further check called `name`, if the run made one."""
        return next((check for check in self.more_checks if check.name == name), None)

    def describe(self) -> str:
        lines = []
        if self.check is not None:
            lines.append(self.check.describe())
        lines.append(f"  {self.hashkv.describe()}")
        for check in self.more_checks:
            lines.append(f"  {check.describe()}")
            lines.extend(f"    {detail}" for detail in check.details[:5])
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        lines.append(f"  recorded: {counts}")
        lines.append(f"  faults: {len(self.faults) or 'none'}")
        lines.extend(f"    {fault}" for fault in self.faults)
        for note in self.notes:
            lines.append(f"  note: {note}")
        lines.append(f"conform verdict: {self.verdict.describe()} ({self.seconds:.1f} s)")
        lines.append(f"report: {self.run_dir}")
        return "\n".join(lines)


def run_conform(options: ConformOptions) -> ConformResult:
    return asyncio.run(_run(options))


def _say(options: ConformOptions, text: str) -> None:
    if options.progress is not None:
        options.progress(text)


async def _run(options: ConformOptions) -> ConformResult:
    started = time.monotonic()
    report_dir = Path(options.report_dir)
    run_dir = report_dir / f"run-{time.strftime('%Y%m%d-%H%M%S')}-seed{options.seed}"
    suffix = 0
    while run_dir.exists():
        suffix += 1
        run_dir = report_dir / f"run-{time.strftime('%Y%m%d-%H%M%S')}-seed{options.seed}-{suffix}"
    run_dir.mkdir(parents=True)
    _link_latest(report_dir, run_dir)
    target = make_target(
        options.target,
        run_dir / "cluster",
        endpoints=list(options.endpoints),
        etcd_bin=options.etcd_bin,
        size=options.members,
        failpoints=options.failpoints,
        faultfs=any(fault in FUSE_FAULTS for fault in options.faults),
        security=options.security,
        secure=options.secure,
        secure_auth=not workload_owns_auth(options.workload),
        snapshot_count=SNAPSHOT_FAULT_COUNT if "corrupt-snap" in options.faults else SNAPSHOT_COUNT,
    )
    recorder = Recorder()
    notes: list[str] = []
    try:
        _say(options, f"starting {target.describe()}")
        await target.start()
        initial = await _capture_initial(target, recorder)
        if initial.process is not None:
            notes.append(f"initial state: {initial.describe()}")
            _say(options, f"initial state: {initial.describe()}")
        injector = FaultInjector(
            target,
            recorder,
            options.faults,
            random.Random(f"faults-{options.seed}"),
            options.fault_interval_s,
            options.fault_hold_s,
            lambda text: _say(options, f"  {recorder.now() / 1e9:6.1f}s {text}"),
        )
        if injector.skipped:
            notes.append(
                f"faults skipped, the target cannot take them: {', '.join(injector.skipped)}"
            )
        watch = LeaderWatch(target, recorder) if injector.members is not None else None
        await _drive(options, target, recorder, injector, initial.revision, watch)
        hashkv = await hashkv_agreement(_client_urls(target))
        membership = None
        if injector.members is not None and watch is not None:
            urls = {name: target.client_url(name) for name in target.member_names()}
            final = await final_member_lists(urls)
            members = injector.members
            membership = check_membership(
                watch.observations,
                members.changes,
                members.expected(),
                final,
                tuple(members.undecided),
            )
            _write_membership(run_dir / "membership.jsonl", watch, members.changes)
    except BaseException:
        with contextlib.suppress(Exception):
            recorder.write(run_dir / "history.jsonl")
        await target.close()
        raise
    await target.close()
    more_checks: tuple[CheckResult, ...] = ()
    if options.hashkv_across:
        _say(options, "HashKV across targets: seeded writes on a fresh member of ours and of etcd")
        more_checks = (
            await hashkv_across(run_dir / "hashkv-across", options.seed, options.etcd_bin),
        )
    recorder.write(run_dir / "history.jsonl")
    injector.write(run_dir / "faults.jsonl")
    _say(options, f"checking {len(recorder.events)} events")
    history = build_history(recorder.events, str(run_dir / "history.jsonl"))
    check_options = CheckOptions(timeout_s=options.check_timeout_s, seed=options.seed)
    report = check_history(history, check_options)
    disk = injector.disk_result()
    if disk is not None:
        more_checks = (disk, *more_checks)
    if membership is not None:
        more_checks = (membership, *more_checks)
    write_report(
        report,
        run_dir,
        check_options,
        faults=[record.to_json() for record in injector.records],
        context={
            "target": target.describe(),
            "workload": options.workload,
            "seed": options.seed,
            "duration": f"{options.duration_s:g} s",
            "faults asked for": list(options.faults),
            "faults skipped": list(injector.skipped),
            "failpoints": list(options.failpoints),
            "initial state": initial.describe(),
            **(
                {"member changes": [c.describe() for c in injector.members.changes]}
                if injector.members is not None
                else {}
            ),
        },
        more_checks=(hashkv, *more_checks),
    )
    verdict = Verdict.merge_all(
        [report.verdict, hashkv.verdict, *(check.verdict for check in more_checks)]
    )
    result = ConformResult(
        verdict=verdict,
        run_dir=run_dir,
        check=report,
        hashkv=hashkv,
        faults=tuple(r.describe() for r in injector.records),
        skipped_faults=tuple(injector.skipped),
        counts=dict(recorder.counts),
        seconds=time.monotonic() - started,
        notes=tuple(notes),
        initial=initial,
        more_checks=more_checks,
    )
    _augment_result(run_dir / "result.json", options, result, target)
    if isinstance(target, LocalCluster) and verdict is Verdict.TRUE:
        cluster_dir = run_dir / "cluster"
        for data in [*cluster_dir.glob("m*.data"), *cluster_dir.glob("m*.disk")]:
            shutil.rmtree(data, ignore_errors=True)
    return result


def _link_latest(report_dir: Path, run_dir: Path) -> None:
    latest = report_dir / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(run_dir.name)


async def _capture_initial(target: Target, recorder: Recorder) -> InitialRecord:
    """The store's state before the workload, recorded as the history's start (the
    model starts empty at revision 1; see conform/initial.py)."""
    try:
        return await capture(recorder, target.endpoints[0])
    except grpc.aio.AioRpcError as error:
        raise TargetError(f"{target.endpoints[0]}: {error.details()}") from error
    except InitialStateError as error:
        raise TargetError(f"{target.endpoints[0]}: {error}", code=ExitCode.USAGE) from error


async def _drive(
    options: ConformOptions,
    target: Target,
    recorder: Recorder,
    injector: FaultInjector,
    floor_revision: int = 1,
    leader_watch: LeaderWatch | None = None,
) -> None:
    """Run the workload and faults for the run's duration. Nothing reads below
    `floor_revision` (the initial state's revision) or watches from before it."""
    stop = asyncio.Event()  # the workers and faults
    watch_stop = asyncio.Event()  # the watches: a little later, to deliver what is committed
    tasks: list[asyncio.Task[None]] = []
    watchers: list[WatchRecorder] = []
    names = target.member_names() or [f"e{i}" for i in range(len(target.endpoints))]
    urls = [target.client_url(n) for n in target.member_names()] or list(target.endpoints)
    workload = make_workload(options.workload)
    hooks = RecordingClient(recorder, urls[0], options.request_timeout_s)
    try:
        await workload.start(hooks, Process(recorder.new_process()))
    except WorkloadError as refused:  # the target refused the workload's set-up: no run
        raise TargetError(f"{urls[0]}: {refused}", code=ExitCode.UNKNOWN) from refused
    watched = list(zip(names, urls, strict=True)) if workload.watch_all else []
    for name, url in watched:
        watcher = WatchRecorder(
            recorder,
            url,
            f"all@{name}",
            WatchRequest(b"\0", b"\0", watch_floor(floor_revision), prev_kv=True),
            resume=True,
        )
        watchers.append(watcher)
        tasks.append(asyncio.create_task(watcher.run(watch_stop)))

    def start_watch(name: str, request: WatchRequest, seconds: float) -> None:
        url = urls[len(watchers) % len(urls)]
        watcher = WatchRecorder(recorder, url, name, request)
        watchers.append(watcher)
        own_stop = asyncio.Event()

        async def timed() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch_stop.wait(), seconds)
            own_stop.set()

        tasks.append(asyncio.create_task(watcher.run(own_stop)))
        tasks.append(asyncio.create_task(timed()))

    clients = [
        RecordingClient(recorder, urls[i % len(urls)], options.request_timeout_s)
        for i in range(options.clients)
    ]
    workers = [
        Worker(
            number=i,
            client=clients[i],
            process=Process(recorder.new_process()),
            rng=random.Random(f"{options.seed}-{i}"),
            keys=options.keys,
            watch_starter=start_watch,
            floor_revision=floor_revision,
            last_revision=floor_revision,
        )
        for i in range(options.clients)
    ]
    period = options.clients / options.rate if options.rate > 0 else 0.0

    async def work(worker: Worker) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            begun = loop.time()
            await workload.step(worker)
            wait = period - (loop.time() - begun)
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)

    async def report_progress() -> None:
        last, last_ops = time.monotonic(), 0
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 2.0)
            now = time.monotonic()
            ops = sum(recorder.counts[k] for k in ("ok", "fail", "info"))
            rate = (ops - last_ops) / max(now - last, 1e-9)
            counts = recorder.counts
            _say(
                options,
                f"  {recorder.now() / 1e9:6.1f}s {ops} ops ({rate:.0f}/s) ok {counts['ok']} "
                f"fail {counts['fail']} info {counts['info']}, watch {counts['watch']}",
            )
            last, last_ops = now, ops

    async def retarget(old_url: str, new_url: str) -> None:
        """A removed member's clients go on through the member that replaced it, and its
        watches resume there (from the revision after the last event they delivered)."""
        for client in clients:
            if client.endpoint == old_url:
                await client.move_to(new_url)
        for watcher in watchers:
            if watcher.endpoint == old_url:
                watcher.endpoint = new_url

    injector.retarget = retarget
    worker_tasks = [asyncio.create_task(work(w)) for w in workers]
    fault_task = asyncio.create_task(injector.run(stop))
    progress_task = asyncio.create_task(report_progress())
    if leader_watch is not None:  # until the last fault's changes are done, and after
        tasks.append(asyncio.create_task(leader_watch.run(watch_stop)))
    try:
        await asyncio.sleep(options.duration_s)
    finally:
        stop.set()
        await asyncio.gather(*worker_tasks, fault_task, progress_task, return_exceptions=True)
        with contextlib.suppress(Exception):  # a finish that fails leaves HashKV to say so
            await workload.finish(hooks, Process(recorder.new_process()))
        await hooks.close()
        await asyncio.sleep(0.5)  # let the watches deliver what is committed
        watch_stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in clients:
            await client.close()
    for task in (*worker_tasks, fault_task):
        error = task.exception() if task.done() and not task.cancelled() else None
        if error is not None:
            raise error


def _write_membership(path: Path, watch: LeaderWatch, changes: list[MemberChange]) -> None:
    """membership.jsonl: every leader observation and member change, in time order."""
    rows = [{"kind": "status", **o.to_json()} for o in watch.observations]
    rows += [{"kind": "member-change", **c.to_json()} for c in changes]
    rows.sort(key=lambda row: int(row["time"]))
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _client_urls(target: Target) -> list[str]:
    return [target.client_url(n) for n in target.member_names()] or list(target.endpoints)


def _augment_result(
    path: Path, options: ConformOptions, result: ConformResult, target: Target
) -> None:
    data: dict[str, Any] = json.loads(path.read_text())
    data["checker_valid"] = data.get("valid")
    data["valid"] = result.verdict.to_json()
    data["checks"].append(result.hashkv.to_json())
    data["checks"].extend(check.to_json() for check in result.more_checks)
    data["conform"] = {
        "target": target.describe(),
        "workload": options.workload,
        "seed": options.seed,
        "duration_s": options.duration_s,
        "faults_requested": list(options.faults),
        "failpoints": list(options.failpoints),
        "faults_skipped": list(result.skipped_faults),
        "faults": list(result.faults),
        "counts": result.counts,
        "notes": list(result.notes),
        "initial_state": result.initial.to_json() if result.initial is not None else None,
        "seconds": round(result.seconds, 3),
    }
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
