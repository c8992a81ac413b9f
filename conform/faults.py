"""Faults of a conformance run, injected on a schedule and logged.

Contract:
- `FAULTS` names what can be asked for: kill (kill -9 of the leader or a follower, then
  a restart on its data), pause (SIGSTOP, later SIGCONT), partition (through the peer
  proxies: one member cut off from all others or, 3 times in 10, from one peer only),
  delay (every peer chunk delayed), drop (every peer connection reset once), compact
  (a recorded Compact request at a recent revision: it is an operation of the
  history), defrag (Maintenance.Defragment of one member under load), corrupt-wal (a
  member's acknowledged write damaged in the middle of its WAL while it is down, then
  the member started: it must refuse; the original bytes are put back and it is
  started again — conform/disk_faults.py; each member's answer is the run's DiskFaults
  check), corrupt-snap (a marker written through a member, writes until it takes a new
  snapshot — the run's cluster snapshots every SNAPSHOT_FAULT_COUNT entries — then that
  snapshot file damaged mid-file while the member is down: it must refuse, or recover
  from what is intact naming the file and keep the marker; bytes put back, restarted),
  power-cut and fsync-eio (on members whose data dirs are faultfs mounts,
  conform/faultfs.py): power-cut kills -9 one member, or half the time every member at
  once (a whole-site power loss), drops every write its disk had not fsynced, and
  starts it on what its disk kept; a recorded write just before the cut and a recorded
  read of it once the members serve again make sure something acknowledged is looked
  at after every cut (the run's linearizability and HashKV checks then judge whether
  anything acknowledged was lost); fsync-eio makes one member's fsyncs
  fail (EIO) while writes go through it: it must stop within FSYNC_EIO_DEADLINE_S
  (DiskFaults: stopped holds, still serving is a violation, neither unknown); then
  fsync is healed and the member started again.
- The history schema has no fault event type, so faults are logged to faults.jsonl
  (one JSON object a line: index, fault, target, detail, start and end on the
  history's clock); the report links the two by time.
- `FaultInjector.run(stop)` injects one fault every `interval_s`, going round the
  asked-for faults in a seeded order (so a short run still sees each of them),
  holds it for `hold_s`, heals it, and at the end heals everything (resumes, restarts,
  heals the network), so the final consistency check sees a whole cluster. A killed
  or paused member counts as healed once it serves again (Status with a leader, up to
  `ready_timeout_s`): the next fault comes only then (the wait is taken off its
  interval, down to MIN_GAP_S), so two faults never overlap (a slow restart under
  load would otherwise leave the next fault's member and the restarting one both out,
  and the run without a quorum).
- replace-member and learner change the cluster's members through etcd's Cluster API
  (conform/member_faults.py); the changes, and what could not be decided (a target that
  does not serve MemberAdd), are kept in `members` for the run's Membership check. The
  removed member's clients move to the new one through `retarget`, set by the run.
- Faults a target cannot take are skipped and listed in `skipped`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from etcdspec.checker.results import CheckResult
from etcdspec.conform.disk_faults import (
    FSYNC_EIO,
    DiskFaultError,
    DiskFaultOutcome,
    SnapDamage,
    WalDamage,
    damage_snapshot,
    damage_wal,
    disk_fault_result,
    last_log_line,
    saved_snapshots,
)
from etcdspec.conform.member_faults import MemberFaults
from etcdspec.conform.recorder import Process, Recorder, RecordingClient
from etcdspec.conform.targets import MEMBER_FAULTS, LocalCluster, Target
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.model.requests import CompactionRequest, PutRequest, RangeRequest, Request

MIN_GAP_S = 0.2  # the least time between one fault's heal and the next fault
FAULTS = (
    "kill",
    "pause",
    "partition",
    "delay",
    "drop",
    "compact",
    "defrag",
    "corrupt-wal",
    "corrupt-snap",
    "power-cut",
    "fsync-eio",
    "replace-member",
    "learner",
)
FSYNC_EIO_DEADLINE_S = 10.0  # how long a member whose fsync fails may take to stop
POWER_CUT_KEY = b"disk-fault/power-cut"  # written before a cut, read after it
FSYNC_EIO_WRITES = 20  # at most this many writes through it while it must stop
MARKER_WRITES_AFTER = 3  # writes through the member after the marker: not the WAL's last
MARKER_WRITE_TRIES = 3
SNAP_MARKER_KEY = b"disk-fault/snap-marker"
SNAP_WRITES_PAST = 20  # corrupt-snap: writes beyond --snapshot-count before giving up


class FaultError(ValueError):
    """An unknown fault name."""


def parse_faults(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in FAULTS and n != "none"]
    if unknown:
        raise FaultError(f"unknown fault(s) {', '.join(unknown)}; choose from {', '.join(FAULTS)}")
    return tuple(n for n in names if n != "none")


@dataclass(frozen=True)
class FaultRecord:
    index: int
    fault: str
    target: str
    detail: str
    start: int
    end: int

    def describe(self) -> str:
        return f"fault {self.index} {self.fault} {self.target}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "fault": self.fault,
            "target": self.target,
            "detail": self.detail,
            "start": self.start,
            "end": self.end,
        }


@dataclass
class FaultInjector:
    target: Target
    recorder: Recorder
    faults: tuple[str, ...]
    rng: random.Random
    interval_s: float = 3.0
    hold_s: float = 1.5
    progress: Callable[[str], None] = lambda text: None
    ready_timeout_s: float = 20.0  # how long a restarted member gets to serve again
    records: list[FaultRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    disk_outcomes: list[DiskFaultOutcome] = field(default_factory=list)
    _killed: set[str] = field(default_factory=set)
    _paused: set[str] = field(default_factory=set)
    _process: Process | None = None
    _owed_s: float = 0.0  # time spent waiting for members to serve, off the next interval
    retarget: Callable[[str, str], Awaitable[None]] | None = None  # move clients (the run)
    members: MemberFaults | None = None  # the membership faults, when asked for

    def __post_init__(self) -> None:
        usable = []
        for name in self.faults:
            if name in ("compact", "defrag") or self.target.supports(name):
                usable.append(name)
            else:
                self.skipped.append(name)
        self.faults = tuple(usable)
        if isinstance(self.target, LocalCluster) and MEMBER_FAULTS & set(self.faults):
            self.members = MemberFaults(
                self.target,
                self.recorder,
                self.rng,
                self._retarget,
                catch_up_timeout_s=max(30.0, self.ready_timeout_s),
            )

    async def _retarget(self, old_url: str, new_url: str) -> None:
        if self.retarget is not None and old_url:
            await self.retarget(old_url, new_url)

    async def run(self, stop: asyncio.Event) -> None:
        if not self.faults:
            return
        order = list(self.faults)
        self.rng.shuffle(order)
        turn = 0
        while not stop.is_set():
            # The wait for a member to serve again counts as part of the interval, so
            # the schedule stays as asked when restarts are quick.
            wait = max(MIN_GAP_S, self.interval_s - self._owed_s)
            self._owed_s = 0.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
            if stop.is_set():
                break
            await self.inject(order[turn % len(order)], stop)
            turn += 1
        await self.heal_all()

    async def _leader(self) -> str | None:
        for name in self.target.member_names():
            if name in self._killed or name in self._paused:
                continue
            try:
                client = RecordingClient(self.recorder, self.target.client_url(name), 1.0)
                try:
                    status = await client.maintenance("Status", rpc_pb2.StatusRequest(), 1.0)
                finally:
                    await client.close()
            except grpc.aio.AioRpcError:
                continue
            ids = getattr(self.target, "ids", {})
            for member, member_id in ids.items():
                if member_id == status.leader:
                    return str(member)
        return None

    async def _pick_member(self) -> tuple[str, str]:
        names = self.target.member_names()
        leader = await self._leader()
        if leader is not None and self.rng.random() < 0.5:
            return leader, "leader"
        name = self.rng.choice(names)
        return name, "leader" if name == leader else "follower"

    async def inject(self, fault: str, stop: asyncio.Event) -> None:
        start = self.recorder.now()
        target, detail = "", ""
        if fault == "kill":
            target, role = await self._pick_member()
            await self.target.kill(target)
            self._killed.add(target)
            detail = f"kill -9 of the {role}"
            self.progress(f"fault: {detail} {target}")
            await self._hold(stop)
            await self.target.restart(target)
            self._killed.discard(target)
            detail += ", restarted" + await self._back(target)
        elif fault == "pause":
            target, role = await self._pick_member()
            await self.target.pause(target)
            self._paused.add(target)
            detail = f"SIGSTOP of the {role}"
            self.progress(f"fault: {detail} {target}")
            await self._hold(stop)
            await self.target.resume(target)
            self._paused.discard(target)
            detail += ", SIGCONT" + await self._back(target)
        elif fault in ("partition", "delay", "drop"):
            network = self.target.network
            assert network is not None
            if fault == "partition" and self.rng.random() < 0.7:
                target, role = await self._pick_member()
                closed = network.isolate(target)
                detail = f"{role} isolated from its peers ({closed} connections cut)"
            elif fault == "partition":
                target, role = await self._pick_member()
                other = self.rng.choice([n for n in self.target.member_names() if n != target])
                closed = network.cut(target, other)
                detail = f"{role} cut from {other} only ({closed} connections cut)"
                target = f"{target}-{other}"
            elif fault == "delay":
                network.delay_s = self.rng.choice([0.02, 0.05, 0.1])
                target, detail = "all", f"peer traffic delayed {network.delay_s * 1000:.0f} ms"
            else:
                target, detail = "all", f"{network.drop()} peer connections reset"
            self.progress(f"fault: {fault} {target}: {detail}")
            await self._hold(stop)
            network.heal()
            detail += ", healed"
        elif fault == "compact":
            target, detail = await self._compact()
            self.progress(f"fault: compact {detail}")
        elif fault == "corrupt-wal":
            target, detail = await self._corrupt_wal()
            self.progress(f"fault: corrupt-wal {target}: {detail}")
        elif fault == "corrupt-snap":
            target, detail = await self._corrupt_snap()
            self.progress(f"fault: corrupt-snap {target}: {detail}")
        elif fault == "power-cut":
            target, detail = await self._power_cut()
            self.progress(f"fault: power-cut {target}: {detail}")
        elif fault == "fsync-eio":
            target, detail = await self._fsync_eio()
            self.progress(f"fault: fsync-eio {target}: {detail}")
        elif fault in MEMBER_FAULTS:
            assert self.members is not None
            if fault == "replace-member":
                victim, role = await self._pick_member()
                target, detail = await self.members.replace(victim, role)
            else:
                target, detail = await self.members.learner()
            self.progress(f"fault: {fault} {target}: {detail}")
        elif fault == "defrag":
            target = self.rng.choice(self.target.member_names() or [""]) or self.target.endpoints[0]
            detail = await self._defrag(target)
            self.progress(f"fault: defrag {target}: {detail}")
        self.records.append(
            FaultRecord(len(self.records), fault, target, detail, start, self.recorder.now())
        )

    async def _put_back(
        self,
        cluster: LocalCluster,
        name: str,
        what: str,
        damage: WalDamage | SnapDamage,
        outcome: DiskFaultOutcome,
    ) -> str:
        """After a disk fault was judged: the member stopped if it serves, the damaged
        bytes put back, the member restarted and serving again; what happened, said."""
        self.disk_outcomes.append(outcome)
        if cluster.is_running(name):
            await cluster.kill(name)
        damage.restore()
        await cluster.restart(name)
        self._killed.discard(name)
        detail = (
            f"{what} {damage.describe()}: {outcome.outcome} ({outcome.evidence}); "
            "bytes put back, restarted"
        )
        return detail + await self._back(name)

    async def _back(self, name: str) -> str:
        """Wait until a restarted or resumed member serves again (answers Status and
        knows a leader), so one fault is healed before the next begins and the run never
        loses its quorum by two faults overlapping; says how long it took."""
        started = self.recorder.now()
        deadline = started + int(self.ready_timeout_s * 1e9)
        url = self.target.client_url(name)
        try:
            return await self._wait_serving(url, started, deadline)
        finally:
            self._owed_s += (self.recorder.now() - started) / 1e9

    async def _wait_serving(self, url: str, started: int, deadline: int) -> str:
        while True:
            client = RecordingClient(self.recorder, url, 1.0)
            try:
                status = await client.maintenance("Status", rpc_pb2.StatusRequest(), 1.0)
                if status.leader != 0:
                    return f" (serving after {(self.recorder.now() - started) / 1e9:.1f} s)"
            except grpc.aio.AioRpcError:
                pass
            finally:
                await client.close()
            if self.recorder.now() > deadline:
                return f" (not serving within {self.ready_timeout_s:g} s)"
            await asyncio.sleep(0.1)

    async def _hold(self, stop: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), self.hold_s)

    async def _compact(self) -> tuple[str, str]:
        """A recorded Compact a little behind the newest revision a read shows."""
        endpoint = self.target.endpoints[0]
        client = RecordingClient(self.recorder, endpoint, 2.0)
        try:
            if self._process is None:
                self._process = Process(self.recorder.new_process())
            read = await client.call(self._process, RangeRequest(b"compact-probe"))
            if read.response is None:
                return endpoint, f"probe read {read.describe()}"
            revision = max(1, read.response.header.revision - self.rng.randint(2, 30))
            outcome = await client.call(self._process, CompactionRequest(revision))
            return endpoint, f"at revision {revision}: {outcome.type} {outcome.code}".rstrip()
        finally:
            await client.close()

    async def _defrag(self, name: str) -> str:
        endpoint = self.target.client_url(name) if name in self.target.member_names() else name
        client = RecordingClient(self.recorder, endpoint, 10.0)
        try:
            await client.maintenance("Defragment", rpc_pb2.DefragmentRequest(), 10.0)
            return "done"
        except grpc.aio.AioRpcError as error:
            return f"{error.code().name} {error.details()}"
        finally:
            await client.close()

    async def _corrupt_wal(self) -> tuple[str, str]:
        """Write a marker and MARKER_WRITES_AFTER more through one member (each answered
        there, so applied and in its WAL), kill it, damage the marker in its WAL, start
        it and see whether it refuses; then put the bytes back and start it again."""
        cluster = self.target
        assert isinstance(cluster, LocalCluster)
        name, role = await self._pick_member()
        marker = f"disk-fault-marker-{self.rng.getrandbits(64):016x}".encode()
        client = RecordingClient(self.recorder, cluster.client_url(name), 10.0)
        try:
            if self._process is None:
                self._process = Process(self.recorder.new_process())
            writes = [PutRequest(b"disk-fault/marker", marker)] + [
                PutRequest(b"disk-fault/after", b"%d" % i) for i in range(MARKER_WRITES_AFTER)
            ]
            for request in writes:
                # A write that failed or timed out (a leader change under load) is tried
                # again, as a new operation of the history; the marker is unique either way.
                for _ in range(MARKER_WRITE_TRIES):
                    written = await client.call(self._process, request)
                    if written.type == "ok":
                        break
                else:
                    why = f"a marker write was {written.describe()} {MARKER_WRITE_TRIES} times"
                    self.disk_outcomes.append(
                        DiskFaultOutcome(name, "not damaged", "undecided", why)
                    )
                    return name, f"not injected: {why}"
        finally:
            await client.close()
        await cluster.kill(name)
        self._killed.add(name)
        try:
            damage = damage_wal(cluster.data_dir(name), marker)
        except DiskFaultError as error:
            self.disk_outcomes.append(
                DiskFaultOutcome(name, "not damaged", "undecided", str(error))
            )
            await cluster.restart(name)
            self._killed.discard(name)
            return name, f"not injected: {error}" + await self._back(name)
        await cluster.restart(name)
        outcome = await self._refused_or_serving(cluster, name)
        return name, await self._put_back(cluster, name, f"{role}'s WAL", damage, outcome)

    async def _corrupt_snap(self) -> tuple[str, str]:
        """Write a marker through one member, then writes until its log says it saved a
        new snapshot (at most --snapshot-count + SNAP_WRITES_PAST), kill it, damage that
        snapshot's file, start it and judge what it does (disk_faults.py's rule);
        then put the bytes back and start it again."""
        cluster = self.target
        assert isinstance(cluster, LocalCluster)
        name, role = await self._pick_member()
        data_dir = cluster.data_dir(name)
        saved = max(saved_snapshots(cluster.log_path(name)), default=0)
        marker = f"snap-fault-marker-{self.rng.getrandbits(64):016x}".encode()
        client = RecordingClient(self.recorder, cluster.client_url(name), 10.0)
        if self._process is None:
            self._process = Process(self.recorder.new_process())
        why = ""
        try:
            written = await client.call(self._process, PutRequest(SNAP_MARKER_KEY, marker))
            if written.type != "ok":
                why = f"the marker write was {written.describe()}"
            most = cluster.snapshot_count + SNAP_WRITES_PAST
            for number in range(most):
                if why or max(saved_snapshots(cluster.log_path(name)), default=0) > saved:
                    break
                await client.call(self._process, PutRequest(b"disk-fault/snap", b"%d" % number))
            else:
                why = f"no snapshot saved after {most} writes"
        finally:
            await client.close()
        if why:
            self.disk_outcomes.append(
                DiskFaultOutcome(name, "not damaged", "undecided", why, "snapshot")
            )
            return name, f"not injected: {why}"
        await cluster.kill(name)
        self._killed.add(name)
        try:
            damage = damage_snapshot(data_dir, max(saved_snapshots(cluster.log_path(name))))
        except DiskFaultError as error:
            self.disk_outcomes.append(
                DiskFaultOutcome(name, "not damaged", "undecided", str(error), "snapshot")
            )
            await cluster.restart(name)
            self._killed.discard(name)
            return name, f"not injected: {error}" + await self._back(name)
        log = Path(cluster.log_path(name))
        mark = log.stat().st_size if log.exists() else 0
        await cluster.restart(name)
        outcome = await self._refused_or_serving(cluster, name)
        if outcome.outcome == "served":
            outcome = await self._snapshot_outcome(cluster, name, damage.path.name, marker, mark)
        else:
            outcome = DiskFaultOutcome(
                name, damage.describe(), outcome.outcome, outcome.evidence, "snapshot"
            )
        return name, await self._put_back(cluster, name, f"{role}'s snapshot", damage, outcome)

    async def _snapshot_outcome(
        self, cluster: LocalCluster, name: str, file: str, marker: bytes, mark: int
    ) -> DiskFaultOutcome:
        """A member serving after its snapshot file was damaged: did its log (since the
        start, from byte `mark`) name the file, and does it hold the marker write?"""
        damage = f"bit flipped in {file}"
        try:
            with Path(cluster.log_path(name)).open("rb") as handle:
                handle.seek(mark)
                said = file in handle.read().decode(errors="replace")
        except OSError:
            said = False
        client = RecordingClient(self.recorder, cluster.client_url(name), 10.0)
        try:
            stub = rpc_pb2_grpc.KVStub(client.channel())
            read = await stub.Range(
                rpc_pb2.RangeRequest(key=SNAP_MARKER_KEY, serializable=True), timeout=10.0
            )
        except grpc.aio.AioRpcError as error:
            evidence = f"the marker read failed: {error.code().name} {error.details()}"
            return DiskFaultOutcome(name, damage, "undecided", evidence, "snapshot")
        finally:
            await client.close()
        value = read.kvs[0].value if read.kvs else None
        if value != marker:
            evidence = f"the marker read {value!r} at revision {read.header.revision}"
            return DiskFaultOutcome(name, damage, "lost", evidence, "snapshot")
        if not said:
            evidence = f"its log never named {file}; the marker was there"
            return DiskFaultOutcome(name, damage, "served", evidence, "snapshot")
        evidence = last_log_line(cluster.log_path(name), (file,))
        return DiskFaultOutcome(name, damage, "recovered", evidence, "snapshot")

    async def _power_cut(self) -> tuple[str, str]:
        """Kill -9 one member (or, half the time, all of them), drop what their disks had
        not fsynced, start them again on what the disks kept."""
        cluster = self.target
        assert isinstance(cluster, LocalCluster)
        if self.rng.random() < 0.5:
            names, target, who = cluster.member_names(), "all", "every member"
        else:
            name, role = await self._pick_member()
            names, target, who = [name], name, f"the {role}"
        url = cluster.client_url(names[0])
        value = f"power-cut-{self.rng.getrandbits(64):016x}".encode()
        before = await self._recorded(url, PutRequest(POWER_CUT_KEY, value))
        for name in names:
            await cluster.kill(name)
            self._killed.add(name)
        dropped = []
        for name in names:
            cut = await asyncio.to_thread(cluster.faultfs(name).cut)
            dropped.append(
                f"{name} lost {cut['dropped_bytes']} unsynced bytes in {cut['dropped_files']} files"
            )
        for name in names:
            await cluster.restart(name)
        back = [f"{name}{await self._back(name)}" for name in names]
        for name in names:
            self._killed.discard(name)
        after = await self._recorded(url, RangeRequest(POWER_CUT_KEY))
        return target, (
            f"power cut of {who} ({'; '.join(dropped)}), restarted: {', '.join(back)}; "
            f"a write before it {before}, a read after it {after}"
        )

    async def _recorded(self, url: str, request: Request) -> str:
        """One recorded operation through `url` (part of the history, so the checks
        judge it); what came of it."""
        if self._process is None:
            self._process = Process(self.recorder.new_process())
        client = RecordingClient(self.recorder, url, 5.0)
        try:
            outcome = await client.call(self._process, request)
        finally:
            await client.close()
        return outcome.type

    async def _fsync_eio(self) -> tuple[str, str]:
        """Fail one member's fsyncs while writes go through it; judge whether it stops;
        heal fsync and start it again."""
        cluster = self.target
        assert isinstance(cluster, LocalCluster)
        name, role = await self._pick_member()
        mount = cluster.faultfs(name)
        await asyncio.to_thread(mount.fail_fsync, True)
        self._killed.add(name)  # healed by a restart, whatever happens below
        try:
            outcome = await self._stopped_or_serving(cluster, name)
        finally:
            await asyncio.to_thread(mount.fail_fsync, False)
        self.disk_outcomes.append(outcome)
        if cluster.is_running(name):
            await cluster.kill(name)
        await cluster.restart(name)
        self._killed.discard(name)
        detail = f"{role}'s fsyncs fail (EIO): {outcome.outcome} ({outcome.evidence}); healed"
        return name, detail + ", restarted" + await self._back(name)

    async def _stopped_or_serving(self, cluster: LocalCluster, name: str) -> DiskFaultOutcome:
        """Send writes through the member until it exits (stopped) or the deadline: then
        it served (still answering Status with a leader) or is undecided."""
        damage = FSYNC_EIO
        started = self.recorder.now()
        deadline = started + int(FSYNC_EIO_DEADLINE_S * 1e9)
        url = cluster.client_url(name)
        if self._process is None:
            self._process = Process(self.recorder.new_process())
        writes = 0
        while self.recorder.now() < deadline:
            if not cluster.is_running(name):
                took = (self.recorder.now() - started) / 1e9
                evidence = f"exited after {took:.1f} s: " + last_log_line(
                    cluster.log_path(name), ("sync", "fsync", "EIO", "Input/output")
                )
                return DiskFaultOutcome(name, damage, "stopped", evidence)
            if writes < FSYNC_EIO_WRITES:
                client = RecordingClient(self.recorder, url, 1.0)
                try:
                    value = f"fsync-eio-{self.rng.getrandbits(64):016x}".encode()
                    await client.call(self._process, PutRequest(b"disk-fault/eio", value))
                    writes += 1
                finally:
                    await client.close()
            else:
                await asyncio.sleep(0.1)
        client = RecordingClient(self.recorder, url, 1.0)
        try:
            status = await client.maintenance("Status", rpc_pb2.StatusRequest(), 1.0)
            if status.leader != 0:
                evidence = (
                    f"after {FSYNC_EIO_DEADLINE_S:g} s and {writes} writes still answering "
                    f"Status, naming leader {status.leader:x}"
                )
                return DiskFaultOutcome(name, damage, "served", evidence)
        except grpc.aio.AioRpcError:
            pass
        finally:
            await client.close()
        evidence = f"running but not serving after {FSYNC_EIO_DEADLINE_S:g} s"
        return DiskFaultOutcome(name, damage, "undecided", evidence)

    async def _refused_or_serving(self, cluster: LocalCluster, name: str) -> DiskFaultOutcome:
        damage = "damaged in the middle"
        deadline = self.recorder.now() + int(self.ready_timeout_s * 1e9)
        url = cluster.client_url(name)
        while self.recorder.now() < deadline:
            if not cluster.is_running(name):
                evidence = last_log_line(cluster.log_path(name))
                return DiskFaultOutcome(name, damage, "refused", evidence)
            client = RecordingClient(self.recorder, url, 1.0)
            try:
                status = await client.maintenance("Status", rpc_pb2.StatusRequest(), 1.0)
                if status.leader != 0:
                    evidence = f"Status answered, naming leader {status.leader:x}"
                    return DiskFaultOutcome(name, damage, "served", evidence)
            except grpc.aio.AioRpcError:
                pass
            finally:
                await client.close()
            await asyncio.sleep(0.1)
        return DiskFaultOutcome(name, damage, "undecided", f"after {self.ready_timeout_s:g} s")

    def disk_result(self) -> CheckResult | None:
        """The DiskFaults check (None when no disk fault ran)."""
        return disk_fault_result(self.disk_outcomes)

    async def heal_all(self) -> None:
        if self.target.network is not None:
            self.target.network.heal()
        for name in list(self._paused):
            await self.target.resume(name)
        for name in list(self._killed):
            await self.target.restart(name)
        for name in sorted(self._paused | self._killed):
            await self._back(name)
        self._paused.clear()
        self._killed.clear()

    def write(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as handle:
            for record in self.records:
                handle.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
