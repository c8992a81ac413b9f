"""Workloads of a conformance run: what each client process asks, seeded.

Contract:
- A workload is a `Workload` with `async step(worker)`: one or a few recorded calls
  (through `Worker.call`, which records and never retries), and optionally watches
  of its own (`Worker.watch`). Randomness comes only from `worker.rng`, a
  `random.Random` seeded from the run's seed and the worker's number.
- Written values are unique in the whole run (`Worker.unique_value`), so every
  observed value names the write that made it.
- `etcd-kv`: puts, gets, prefix ranges with limits, stale reads at past revisions
  (`stale_revision`: 3 in 4 within the last RECENT_REVISIONS, as a watch cache or a
  resumed list reads; else anywhere back to the start),
  deletes, multi-op txns, CAS on mod_revision (weights in KV_WEIGHTS).
- `leases`: grant, put with a lease, keep-alive, revoke, reads; short TTLs so leases
  also expire during the run.
- `lease-guarantee`: each worker grants a short lease, puts one held key with it
  (HELD_PREFIX), keeps it alive a few times while reading the key, then lets it lapse
  with one late keep-alive just after its expiry, reading until the key is gone;
  checker/lease_checks.py judges the reads against the acknowledged TTLs.
- `kubernetes`: the API server's patterns: list a prefix, then watch from the list's
  revision + 1; create with mod_revision == 0; optimistic update and delete guarded
  by mod_revision; compaction as a txn on the compact_rev_key, then Compact.
- `watch`: etcd-kv traffic plus watches of its own starting in the past, at a possibly
  compacted revision, and in the future.
- `locks`: each step grants a short lease (LOCK_LEASE_TTL_S, never kept alive), Locks
  one of LOCK_NAMES names with it (etcd's v3lock, waiting up to LOCK_WAIT_S), makes two
  fenced writes (`fenced_write`: a txn that, only while the lock key exists, writes the
  worker's unique value to the lock's fence key and reads the lock's queue) around a
  short hold, and Unlocks. checker/mutual_exclusion.py judges the fenced writes.
- `etcd-kv-writes`: etcd-kv with writes weighted up (WRITE_WEIGHTS): most calls change
  the store, for faults that strike while writes are being applied (kill -9 under
  write load).
- `auth`: `start` (before the workers, recorded) adds root, the roles of AUTH_ROLES and
  the users of AUTH_USERS and enables auth; each step is a KV request as one of those
  users (now and then without a token), many of them outside the user's grants, or,
  one step in AUTH_CHANGE_EVERY, a permission or role granted or revoked by root
  (`conform/auth_client.py` records each with its user); `finish` disables auth again
  (HashKV needs no token then). No all-key watches (a watch needs a READ grant).
- Hooks: `start(client, process)` and `finish(client, process)` run once before the
  workers start and after they stop (nothing by default); `watch_all` says whether the
  run watches every key from every member.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from etcdspec.conform.auth_client import AuthClient
from etcdspec.conform.recorder import LockOutcome, Outcome, Process, RecordingClient
from etcdspec.model.auth_requests import (
    AuthDisableRequest,
    AuthEnableRequest,
    AuthRequest,
    AuthRoleAddRequest,
    AuthRoleGrantPermissionRequest,
    AuthRoleRevokePermissionRequest,
    AuthUserAddRequest,
    AuthUserGrantRoleRequest,
    AuthUserRevokeRoleRequest,
    Permission,
    PermType,
)
from etcdspec.model.requests import (
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseKeepAliveRequest,
    LeaseKeepAliveResponse,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    RangeResponse,
    Request,
    TxnRequest,
)
from etcdspec.model.watch import WatchRequest

KV_WEIGHTS = {
    "put": 30,
    "get": 20,
    "range": 8,
    "stale_read": 6,
    "delete": 8,
    "txn": 10,
    "cas": 18,
}
RECENT_REVISIONS = 100  # how far back most stale reads go
UNAVAILABLE_PAUSE_S = 0.1  # after a call that could not reach its member
WRITE_WEIGHTS = {"put": 50, "get": 8, "delete": 10, "txn": 22, "cas": 10}
# Lease TTLs (s): one short enough to expire within a short run, the others not, so
# the checker has few expiries to place (each widens its search).
LEASE_TTLS = (3, 15, 60)
K8S_PREFIX = b"/registry/pods/"
K8S_COMPACT_KEY = b"compact_rev_key"

LOCK_NAMES = 2  # lock0, lock1: several workers contend for each
LOCK_LEASE_TTL_S = 5  # a holder cut off by a fault loses its lock within this
LOCK_WAIT_S = 8.0  # how long a Lock call may wait for its turn
LOCK_HOLD_S = 0.05  # the longest hold between the two fenced writes
FENCE_PREFIX = b"fence/"

# lease-guarantee: etcd's minimum TTL (2 s with a 1 s election timeout); a late
# keep-alive probes the moment just after a lapsed lease's expiry, before its revoke.
HELD_TTL_S = 2
HELD_PREFIX = b"lease-held/"  # checker/lease_checks.py judges keys under it
LATE_KEEPALIVE_S = 0.03  # how long after the lapsed lease's expiry the probe goes
PROBE_WINDOW_S = 0.3  # a step this close to the probe time waits for it
HELD_GIVE_UP_S = 6.0  # a lapsed lease's key not seen gone by then: start another

WatchStarter = Callable[[str, WatchRequest, float], None]  # starts a task, returns


class WorkloadError(ValueError):
    """An unknown workload name or a bad workload setting."""


@dataclass
class Worker:
    """One client process slot: its client, its process id, its random source."""

    number: int
    client: RecordingClient
    process: Process
    rng: random.Random
    keys: int
    watch_starter: WatchStarter | None = None
    last_revision: int = 1  # the highest header.revision this worker has seen
    floor_revision: int = 1  # the initial state's revision: nothing reads below it
    sequence: int = 0
    leases: list[int] = field(default_factory=list)
    watches: int = 0

    def unique_value(self) -> bytes:
        self.sequence += 1
        return f"w{self.number}-{self.sequence}".encode()

    def key(self) -> bytes:
        return f"k{self.rng.randrange(self.keys)}".encode()

    async def call(self, request: Request) -> Outcome:
        """One recorded call. A call that could not be sent (its member is down) is
        followed by a short pause, so a client of a killed member does not spin through
        thousands of failed calls until it is back."""
        outcome = await self.client.call(self.process, request)
        if outcome.response is not None:
            self.last_revision = max(self.last_revision, outcome.response.header.revision)
        elif outcome.type == "fail" and outcome.code == "UNAVAILABLE":
            await asyncio.sleep(UNAVAILABLE_PAUSE_S)
        return outcome

    async def lock(self, name: bytes, lease: int) -> LockOutcome:
        """One recorded Lock (waiting up to LOCK_WAIT_S), paused after as `call`."""
        outcome = await self.client.lock(self.process, name, lease, LOCK_WAIT_S)
        if outcome.type == "ok":
            self.last_revision = max(self.last_revision, outcome.revision)
        elif outcome.type == "fail" and outcome.code == "UNAVAILABLE":
            await asyncio.sleep(UNAVAILABLE_PAUSE_S)
        return outcome

    async def unlock(self, key: bytes) -> LockOutcome:
        return await self.client.unlock(self.process, key)

    def watch(self, request: WatchRequest, seconds: float) -> None:
        """Start a recorded watch of this worker's for `seconds` (runs in the background)."""
        if self.watch_starter is None:
            return
        self.watches += 1
        self.watch_starter(f"w{self.number}.{self.watches}", request, seconds)


class Workload:
    name = ""
    watch_all = True  # the run watches every key from every member
    owns_auth = False  # sets up users and enables auth itself (a secured target must not)

    async def step(self, worker: Worker) -> None:
        raise WorkloadError(f"workload {self.name or type(self).__name__} has no step")

    async def start(self, client: RecordingClient, process: Process) -> None:
        """Once, before the workers start (recorded through `client`)."""

    async def finish(self, client: RecordingClient, process: Process) -> None:
        """Once, after the workers stopped."""


class KvWorkload(Workload):
    name = "etcd-kv"

    def __init__(self, weights: dict[str, int] | None = None) -> None:
        self.weights = dict(weights or KV_WEIGHTS)
        unknown = set(self.weights) - set(KV_WEIGHTS)
        if unknown:
            raise WorkloadError(
                f"unknown etcd-kv operations {sorted(unknown)}; use {list(KV_WEIGHTS)}"
            )

    async def step(self, worker: Worker) -> None:
        names = list(self.weights)
        kind = worker.rng.choices(names, [self.weights[n] for n in names])[0]
        rng = worker.rng
        if kind == "put":
            await worker.call(
                PutRequest(worker.key(), worker.unique_value(), prev_kv=rng.random() < 0.3)
            )
        elif kind == "get":
            await worker.call(RangeRequest(worker.key()))
        elif kind == "range":
            await worker.call(RangeRequest(b"k", b"l", limit=rng.choice([0, 2, 5])))
        elif kind == "stale_read":
            await worker.call(RangeRequest(b"k", b"l", revision=stale_revision(worker)))
        elif kind == "delete":
            await worker.call(DeleteRangeRequest(worker.key(), prev_kv=rng.random() < 0.5))
        elif kind == "txn":
            a, b = worker.key(), worker.key()
            await worker.call(
                TxnRequest(
                    compare=(Compare(a, CompareTarget.VERSION, CompareResult.GREATER, 0),),
                    success=(PutRequest(b, worker.unique_value()), RangeRequest(a)),
                    failure=(PutRequest(a, worker.unique_value()), RangeRequest(b)),
                )
            )
        else:
            await cas(worker, worker.key())


def stale_revision(worker: Worker) -> int:
    """A past revision to read at: mostly recent ones, now and then any (the checker's
    model answers a read at revision r by walking back from the newest revision, so
    uniformly old reads cost it time quadratic in the run's length)."""
    floor, last = worker.floor_revision, max(worker.floor_revision, worker.last_revision)
    if worker.rng.random() < 0.75:
        floor = max(floor, last - RECENT_REVISIONS)
    return worker.rng.randint(floor, last)


async def cas(worker: Worker, key: bytes) -> None:
    """Read a key, then write it only if its mod_revision is still the one read."""
    read = await worker.call(RangeRequest(key))
    if not isinstance(read.response, RangeResponse):
        return
    mod = read.response.kvs[0].mod_revision if read.response.kvs else 0
    await worker.call(
        TxnRequest(
            compare=(Compare(key, CompareTarget.MOD, CompareResult.EQUAL, mod),),
            success=(PutRequest(key, worker.unique_value()),),
            failure=(RangeRequest(key),),
        )
    )


class LeaseWorkload(Workload):
    name = "leases"

    async def step(self, worker: Worker) -> None:
        rng = worker.rng
        choice = rng.random()
        if choice < 0.15 or not worker.leases:
            outcome = await worker.call(LeaseGrantRequest(ttl=rng.choice(LEASE_TTLS)))
            if isinstance(outcome.response, LeaseGrantResponse):
                worker.leases.append(outcome.response.id)
                worker.leases = worker.leases[-4:]
        elif choice < 0.5:
            lease = rng.choice(worker.leases)
            await worker.call(PutRequest(worker.key(), worker.unique_value(), lease=lease))
        elif choice < 0.65:
            await worker.call(LeaseKeepAliveRequest(rng.choice(worker.leases)))
        elif choice < 0.72:
            lease = rng.choice(worker.leases)
            worker.leases.remove(lease)
            await worker.call(LeaseRevokeRequest(lease))
        elif choice < 0.8:
            await worker.call(PutRequest(worker.key(), worker.unique_value()))
        else:
            await worker.call(RangeRequest(worker.key()))


class KubernetesWorkload(Workload):
    name = "kubernetes"

    async def step(self, worker: Worker) -> None:
        rng = worker.rng
        choice = rng.random()
        key = K8S_PREFIX + f"pod{rng.randrange(worker.keys)}".encode()
        if choice < 0.1:
            listed = await worker.call(RangeRequest(K8S_PREFIX, _prefix_end(K8S_PREFIX), limit=50))
            if isinstance(listed.response, RangeResponse):
                start = listed.response.header.revision + 1
                request = WatchRequest(K8S_PREFIX, _prefix_end(K8S_PREFIX), start, prev_kv=True)
                worker.watch(request, rng.uniform(0.5, 2.0))
        elif choice < 0.3:
            await worker.call(
                TxnRequest(
                    compare=(Compare(key, CompareTarget.MOD, CompareResult.EQUAL, 0),),
                    success=(PutRequest(key, worker.unique_value()),),
                    failure=(RangeRequest(key),),
                )
            )
        elif choice < 0.75:
            await cas(worker, key)
        elif choice < 0.85:
            read = await worker.call(RangeRequest(key))
            if isinstance(read.response, RangeResponse) and read.response.kvs:
                mod = read.response.kvs[0].mod_revision
                await worker.call(
                    TxnRequest(
                        compare=(Compare(key, CompareTarget.MOD, CompareResult.EQUAL, mod),),
                        success=(DeleteRangeRequest(key),),
                        failure=(RangeRequest(key),),
                    )
                )
        elif choice < 0.9:
            await kubernetes_compaction(worker)
        else:
            await worker.call(RangeRequest(key))


async def kubernetes_compaction(worker: Worker) -> None:
    """The API server's compaction: claim the round with a txn on compact_rev_key (its
    version as the fence), then compact at the revision read a round earlier."""
    read = await worker.call(RangeRequest(K8S_COMPACT_KEY))
    if not isinstance(read.response, RangeResponse):
        return
    version = read.response.kvs[0].version if read.response.kvs else 0
    target = max(1, read.response.header.revision - 20)
    claim = await worker.call(
        TxnRequest(
            compare=(
                Compare(K8S_COMPACT_KEY, CompareTarget.VERSION, CompareResult.EQUAL, version),
            ),
            success=(
                PutRequest(K8S_COMPACT_KEY, str(target).encode() + b"-" + worker.unique_value()),
            ),
            failure=(RangeRequest(K8S_COMPACT_KEY),),
        )
    )
    if claim.response is not None and getattr(claim.response, "succeeded", False) and target > 1:
        await worker.call(CompactionRequest(target))


class WatchWorkload(KvWorkload):
    name = "watch"

    async def step(self, worker: Worker) -> None:
        if worker.rng.random() < 0.08:
            kind = worker.rng.choice(["past", "compacted", "future"])
            floor = watch_floor(worker.floor_revision)
            if kind == "past":
                start = worker.rng.randint(floor, max(floor, worker.last_revision))
            elif kind == "compacted":
                start = floor
            else:
                start = worker.last_revision + worker.rng.randint(1, 20)
            request = WatchRequest(b"k", b"l", start, prev_kv=worker.rng.random() < 0.5)
            worker.watch(request, worker.rng.uniform(0.5, 2.0))
            return
        await super().step(worker)


class WriteHeavyWorkload(KvWorkload):
    name = "etcd-kv-writes"

    def __init__(self) -> None:
        super().__init__(WRITE_WEIGHTS)


class LocksWorkload(Workload):
    name = "locks"

    async def step(self, worker: Worker) -> None:
        rng = worker.rng
        name = f"lock{rng.randrange(LOCK_NAMES)}".encode()
        granted = await worker.call(LeaseGrantRequest(ttl=LOCK_LEASE_TTL_S))
        if not isinstance(granted.response, LeaseGrantResponse):
            return
        held = await worker.lock(name, granted.response.id)
        if held.type != "ok":
            return
        await worker.call(fenced_write(name, held.key, worker.unique_value()))
        await asyncio.sleep(rng.uniform(0, LOCK_HOLD_S))
        await worker.call(fenced_write(name, held.key, worker.unique_value()))
        await worker.unlock(held.key)


def fenced_write(name: bytes, key: bytes, value: bytes) -> TxnRequest:
    """The holder's write: only while its lock key exists, put `value` on the lock's
    fence key and read the whole queue of the lock (at the write's revision)."""
    prefix = name + b"/"
    return TxnRequest(
        compare=(Compare(key, CompareTarget.CREATE, CompareResult.GREATER, 0),),
        success=(PutRequest(FENCE_PREFIX + name, value), RangeRequest(prefix, _prefix_end(prefix))),
        failure=(RangeRequest(key),),
    )


ROOT_PASSWORD = "root-pw"
AUTH_USERS = {"alice": "ra", "bob": "rb", "carol": "rc"}  # user -> the role it starts with
AUTH_ROLES: dict[str, tuple[Permission, ...]] = {
    "ra": (Permission(PermType.READWRITE, b"k0", b"k3"),),  # k0, k1, k2
    "rb": (Permission(PermType.READ, b"k", b"l"),),  # every k... key, read only
    "rc": (Permission(PermType.WRITE, b"k4"), Permission(PermType.READ, b"k3", b"k5")),
}
AUTH_CHANGE_EVERY = 12  # one step in this many changes a permission or a role
AUTH_SPARE: tuple[Permission, ...] = (  # what a permission change grants or revokes
    Permission(PermType.READ, b"k4"),
    Permission(PermType.WRITE, b"k5"),
    Permission(PermType.READWRITE, b"k3"),
    Permission(PermType.READWRITE, b"k0", b"k3"),
    Permission(PermType.READ, b"k", b"l"),
)


def _password(user: str) -> str:
    return ROOT_PASSWORD if user == "root" else f"{user}-pw"


class AuthWorkload(Workload):
    name = "auth"
    watch_all = False
    owns_auth = True

    def __init__(self) -> None:
        self.clients: dict[int, AuthClient] = {}
        self.passwords = {user: _password(user) for user in ("root", *AUTH_USERS)}

    def _client(self, worker: Worker) -> AuthClient:
        if worker.number not in self.clients:
            self.clients[worker.number] = AuthClient(worker.client, self.passwords)
        return self.clients[worker.number]

    async def start(self, client: RecordingClient, process: Process) -> None:
        setup: list[AuthRequest] = [
            AuthUserAddRequest("root", ROOT_PASSWORD),
            AuthUserGrantRoleRequest("root", "root"),
        ]
        for role, perms in AUTH_ROLES.items():
            setup.append(AuthRoleAddRequest(role))
            setup += [AuthRoleGrantPermissionRequest(role, perm) for perm in perms]
        for user, role in AUTH_USERS.items():
            setup += [
                AuthUserAddRequest(user, _password(user)),
                AuthUserGrantRoleRequest(user, role),
            ]
        setup.append(AuthEnableRequest())
        admin = AuthClient(client, self.passwords)
        for request in setup:
            outcome = await admin.auth(process, None, request)
            if outcome.type != "ok":
                raise WorkloadError(f"auth set-up {request.describe()}: {outcome.describe()}")

    async def finish(self, client: RecordingClient, process: Process) -> None:
        await AuthClient(client, self.passwords).auth(process, "root", AuthDisableRequest())

    async def step(self, worker: Worker) -> None:
        rng = worker.rng
        auth = self._client(worker)
        if rng.randrange(AUTH_CHANGE_EVERY) == 0:
            await auth.auth(worker.process, "root", self._change(rng))
            return
        user = "" if rng.random() < 0.05 else rng.choice(sorted(AUTH_USERS))
        key = worker.key()
        choice = rng.random()
        request: Request
        if choice < 0.35:
            request = PutRequest(key, worker.unique_value(), prev_kv=rng.random() < 0.2)
        elif choice < 0.65:
            request = RangeRequest(key)
        elif choice < 0.75:
            request = RangeRequest(b"k0", rng.choice([b"k3", b"k5", b"l"]))
        elif choice < 0.85:
            request = DeleteRangeRequest(key, prev_kv=rng.random() < 0.3)
        else:
            other = worker.key()
            request = TxnRequest(
                compare=(Compare(key, CompareTarget.VERSION, CompareResult.GREATER, 0),),
                success=(PutRequest(other, worker.unique_value()),),
                failure=(RangeRequest(key),),
            )
        outcome = await auth.call(worker.process, user, request)
        if outcome is not None and outcome.response is not None:
            worker.last_revision = max(worker.last_revision, outcome.response.header.revision)

    def _change(self, rng: random.Random) -> AuthRequest:
        role = rng.choice(sorted(AUTH_ROLES))
        if rng.random() < 0.7:
            perm = rng.choice(AUTH_SPARE)
            if rng.random() < 0.5:
                return AuthRoleGrantPermissionRequest(role, perm)
            return AuthRoleRevokePermissionRequest(role, perm.key, perm.range_end)
        user = rng.choice(sorted(AUTH_USERS))
        if rng.random() < 0.5:
            return AuthUserGrantRoleRequest(user, role)
        return AuthUserRevokeRoleRequest(user, role)


@dataclass
class HeldLease:
    """A lease-guarantee worker's lease: its held key, when its last acknowledged call
    was sent (`renewed`) and answered (`acked`: the member renewed it between the two, so
    its expiry is at most `acked` + TTL), and how many keep-alives it still gets before
    it lapses."""

    lease: int
    key: bytes
    renewed: float
    acked: float
    keepalives: int
    probed: bool = False


class LeaseGuaranteeWorkload(Workload):
    """Each worker grants a lease (HELD_TTL_S), puts one held key with it, keeps it alive
    a few times (every half TTL), reading the key in between, then lets it lapse: one
    late keep-alive just after the expiry (LATE_KEEPALIVE_S), and reads until the key is
    gone. checker/lease_checks.py judges the reads against the acknowledged TTLs."""

    name = "lease-guarantee"
    watch_all = False  # the judged evidence is reads; watches would only add load

    def __init__(self) -> None:
        self.held: dict[int, HeldLease] = {}

    async def step(self, worker: Worker) -> None:
        held = self.held.get(worker.number)
        if held is None:
            await self._start(worker)
            return
        now = time.monotonic()
        if held.keepalives > 0 and now - held.renewed >= HELD_TTL_S / 2:
            held.keepalives -= 1
            outcome = await worker.call(LeaseKeepAliveRequest(held.lease))
            response = outcome.response
            if isinstance(response, LeaseKeepAliveResponse) and response.ttl > 0:
                held.renewed, held.acked = now, time.monotonic()
            else:
                held.keepalives = 0  # lost: let it lapse from the last acknowledgement
            return
        # After the member's expiry however slow the acknowledgement was: timed from the
        # sending, a probe could arrive before it and be a plain renewal.
        probe_at = held.acked + HELD_TTL_S + LATE_KEEPALIVE_S
        if held.keepalives == 0 and not held.probed and now >= probe_at - PROBE_WINDOW_S:
            await asyncio.sleep(max(0.0, probe_at - now))  # exactly then, not a step late
            held.probed = True
            await worker.call(LeaseKeepAliveRequest(held.lease))
            return
        outcome = await worker.call(RangeRequest(held.key))
        gone = isinstance(outcome.response, RangeResponse) and not outcome.response.kvs
        if (gone and held.probed) or now - held.renewed > HELD_GIVE_UP_S:
            del self.held[worker.number]

    async def _start(self, worker: Worker) -> None:
        sent = time.monotonic()
        granted = await worker.call(LeaseGrantRequest(ttl=HELD_TTL_S))
        if not isinstance(granted.response, LeaseGrantResponse):
            return
        worker.sequence += 1
        tag = worker.rng.randrange(1_000_000)  # seeded, like every workload's choices
        key = HELD_PREFIX + f"w{worker.number}-{worker.sequence}-{tag}".encode()
        acked = time.monotonic()
        lease = granted.response.id
        put = await worker.call(PutRequest(key, worker.unique_value(), lease=lease))
        if put.response is not None:
            keepalives = worker.rng.randint(1, 3)
            self.held[worker.number] = HeldLease(lease, key, sent, acked, keepalives)


WORKLOADS: dict[str, Callable[[], Workload]] = {
    "etcd-kv": KvWorkload,
    "etcd-kv-writes": WriteHeavyWorkload,
    "leases": LeaseWorkload,
    "lease-guarantee": LeaseGuaranteeWorkload,
    "kubernetes": KubernetesWorkload,
    "watch": WatchWorkload,
    "locks": LocksWorkload,
    "auth": AuthWorkload,
}


def make_workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]()
    except KeyError:
        raise WorkloadError(
            f"unknown workload {name!r}; choose one of {', '.join(WORKLOADS)}"
        ) from None


def workload_owns_auth(name: str) -> bool:
    """Whether the named workload sets up users and enables auth itself (an unknown name
    is refused later, by make_workload)."""
    factory = WORKLOADS.get(name)
    return factory is not None and getattr(factory, "owns_auth", False)


def watch_floor(floor_revision: int) -> int:
    """The first revision a recorded watch may start at: 1 on a fresh store, else the
    one after the initial state (the history does not know the store's real past)."""
    return 1 if floor_revision <= 1 else floor_revision + 1


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])
