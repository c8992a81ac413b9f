"""One member of the reference server: its parts built, started and stopped together.

A `Member` wires, on one asyncio event loop (one thread), the parts of this package: its
data (server.recovery: the Raft state on disk and the state machine), the Raft driver and
the loop that handles its Readies as the pump's plan says (server.raft_loop, server.pump),
committed entries applied in order (server.apply), proposals (server.proposals),
linearizable reads (server.reads), leases (server.leases), what it knows of its cluster
(server.cluster), snapshots (server.snapshots), the peer transport (server.peer), the
client API's gRPC server over those parts (etcdspec.impl.api), the metrics endpoint, the
ticker and the trace. It decides only which part hears of what: a peer's frame goes to
the driver; a change of leader to the reads, the leases and the cluster view. Once
started, it publishes its name and client URLs through the log (server.publish); its
client port listens from the start but accepts connections only once that publish is
applied here, as etcd's serves clients only once its server is ready.

A client write is acknowledged only after its entry is committed (durable on a quorum)
and applied here; serializable reads read the local state machine at once. Failpoints
(etcdspec.impl.failpoints) are read at start: ack_before_fsync is a variation of the
pump's plan; the others sit in the leases, the servicers, the watch hub and the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from etcdspec.impl import errors, failpoints
from etcdspec.impl.api.client_http import Health
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.api.serve import start_grpc_server
from etcdspec.impl.api.watch_stream import WatchStreams
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.auth_tokens import token_provider
from etcdspec.impl.kv.members import MemberRecord
from etcdspec.impl.raft import codec as raft_codec
from etcdspec.impl.raft.core import Role
from etcdspec.impl.raft.driver import RaftConfig, RaftDriver
from etcdspec.impl.raft.messages import NONE
from etcdspec.impl.rpc.grpc_h2 import GrpcH2Server
from etcdspec.impl.rpc.http1 import Http1Hooks
from etcdspec.impl.server.apply import ApplyQueue
from etcdspec.impl.server.cluster import ClusterView, own_attributes
from etcdspec.impl.server.config import MemberConfig, effective_bcrypt_cost, parse_url
from etcdspec.impl.server.join import members_answer, read_identity
from etcdspec.impl.server.leases import LeaseKeeper
from etcdspec.impl.server.membership import Membership
from etcdspec.impl.server.metrics import Metrics, MetricsServer
from etcdspec.impl.server.peer import PeerTransport
from etcdspec.impl.server.proposals import Proposals
from etcdspec.impl.server.publish import publish_attributes
from etcdspec.impl.server.pump import PumpSettings
from etcdspec.impl.server.raft_loop import RaftLoop
from etcdspec.impl.server.reads import ReadIndexQueue
from etcdspec.impl.server.recovery import MemberData, open_member_data
from etcdspec.impl.server.snapshots import Snapshots
from etcdspec.impl.server.ticker import Ticker
from etcdspec.impl.server.tls import leader_credentials, listener_contexts, peer_contexts
from etcdspec.impl.server.trace import MemberTrace, TraceWriter

log = logging.getLogger("etcdspec.impl.server.member")


def bcrypt_cost(config: MemberConfig) -> int:
    """--bcrypt-cost as used, with etcd's warning for one out of range."""
    cost, warning = effective_bcrypt_cost(config.bcrypt_cost)
    if warning is not None:
        log.warning(warning, extra={"given_cost": config.bcrypt_cost, "cost": cost})
    return cost


def peer_address(record: MemberRecord) -> tuple[str, int]:
    """Where a recorded member listens for its peers (its first peer URL)."""
    endpoint = parse_url(record.peer_urls[0], "peerURLs")
    return endpoint.host, endpoint.port


def initial_members(config: MemberConfig) -> list[MemberRecord]:
    """The members of a new cluster, as --initial-cluster names them."""
    return [
        MemberRecord(
            member_id=peer.member_id,
            name=peer.name,
            peer_urls=(peer.peer.url,),
            initial_name=peer.name,
        )
        for peer in config.peers
    ]


def joining_configuration(
    member_id: int, voters: tuple[int, ...], learners: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The Raft configuration a voter that joined an existing cluster starts with, before
    it has applied anything: the cluster's configuration when it joined (its own addition
    included), with itself among the learners, so that its Raft core is joining (as a
    learner's is: etcdspec.impl.raft.core). The log it receives holds the changes made
    before it was added; joining, its core keeps the configuration it was given until it
    applies its own addition (which makes it a voter), where a core given itself as a
    voter applied those earlier changes again on top of it (a learner added then removed
    before it joined was, for a while, in its configuration with itself). etcd's new
    member starts with no configuration and rebuilds it from those changes in order: in
    both, it is never a voter in its own configuration before its addition is applied."""
    others = tuple(voter for voter in voters if voter != member_id)
    return others, (*learners, member_id)


class MemberStartError(Exception):
    """The member could not start (data directory, ports); the message says why."""


class Member:
    """See the module docstring. Create, `await start()`, serve, `await stop()`.

    `pump_settings` chooses the variations of the pump's plan (server.pump; default: every
    speed-up on, and the failpoint ack_before_fsync if it is active). The parts are None
    until `start` has built them."""

    def __init__(self, config: MemberConfig, pump_settings: PumpSettings | None = None) -> None:
        self.config = config
        self.pump_settings = pump_settings
        self.member_id = config.member_id
        self.cluster_id = config.cluster_id
        self.metrics = Metrics()
        self.rng = random.Random(config.seed ^ self.member_id)
        self.data: MemberData | None = None
        self.driver: RaftDriver | None = None
        self.raft: RaftLoop | None = None
        self.applying: ApplyQueue | None = None
        self.proposals: Proposals | None = None
        self.reads: ReadIndexQueue | None = None
        self.cluster: ClusterView | None = None
        self.leases: LeaseKeeper | None = None
        self.membership: Membership | None = None
        self.snapshots: Snapshots | None = None
        self.watches: WatchStreams | None = None
        self.transport: PeerTransport | None = None
        self.grpc_server: GrpcH2Server | None = None
        self.metrics_server: MetricsServer | None = None
        self.trace: MemberTrace | None = None
        self.failure: str | None = None
        self.stopped = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._publisher: asyncio.Task[bool] | None = None
        self._stopping = False
        self._removed_seen = False

    # ---- life cycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Recover from disk and start serving; on failure, release everything and raise
        MemberStartError saying what could not be done."""
        try:
            await self._start()
        except Exception as error:
            self._stopping = False
            with contextlib.suppress(Exception):
                await self.stop()
            if isinstance(error, MemberStartError):
                raise
            raise MemberStartError(f"{self.config.name}: cannot start: {error}") from error

    async def _start(self) -> None:
        config = self.config
        data, recovered = open_member_data(
            Path(config.data_dir),
            self.member_id,
            quota_bytes=config.quota_backend_bytes,
            on_watch_ready=self._on_watch_ready,
            tokens=token_provider(config.auth_token, config.auth_token_ttl_s),
        )
        self.data = data
        state = data.state
        identity = read_identity(config.data_dir)
        reset = False
        if identity is not None:  # joined an existing cluster (server.join)
            state.members().seed(list(identity.members), self.member_id)
        elif config.initial_cluster_state == "new":
            reset = state.members().seed(initial_members(config), self.member_id)
        records = state.members().current()
        voters = tuple(r.member_id for r in records if not r.is_learner) or tuple(
            peer.member_id for peer in config.peers
        )
        learners = tuple(r.member_id for r in records if r.is_learner)
        if identity is not None and recovered.applied == 0 and self.member_id in voters:
            voters, learners = joining_configuration(self.member_id, voters, learners)
        raft_config = RaftConfig(
            id=self.member_id,
            voters=voters,
            learners=learners,
            election_tick=config.election_ticks,
            heartbeat_tick=1,
            defer_commit_broadcast=True,
        )
        persisted = recovered.persisted
        if reset and persisted.snapshot is not None:
            # Data made under another member id (the same data directory started with
            # other URLs): the configuration is the flags', as the member records now.
            snapshot = persisted.snapshot
            meta = replace(snapshot.meta, voters=voters, learners=learners)
            persisted = replace(persisted, snapshot=replace(snapshot, meta=meta))
        driver = self.driver = RaftDriver(
            raft_config, self.rng, persisted=persisted, applied=recovered.applied
        )
        if config.trace_file:
            writer = TraceWriter(config.trace_file, self.member_id)
            self.trace = MemberTrace(writer, driver, lambda: self.applied_index)
        log.info(
            "member starting",
            extra={"member": config.describe(), "recovered": recovered.describe()},
        )
        wake = self._request_pump
        cluster = self.cluster = ClusterView(
            config, driver, state, applied_index=lambda: self.applied_index, wake=wake
        )
        leader_id = self._leader_id
        metrics, trace = self.metrics, self.trace
        proposals = self.proposals = Proposals(
            driver, state, config, metrics=metrics, wake=wake, leader_id=leader_id, trace=trace
        )
        reads = self.reads = ReadIndexQueue(driver, self.member_id, wake=wake, leader_id=leader_id)
        applying = self.applying = ApplyQueue(
            state, voters, recovered.applied, resolver=proposals, metrics=metrics, trace=trace
        )
        if trace is not None:
            trace.event("start")  # the recovered state, the applied index included
        leases = self.leases = LeaseKeeper(
            driver,
            state,
            proposals,
            election_timeout_s=config.election_timeout_ms / 1000.0,
            leader_id=leader_id,
            leader_client_urls=cluster.client_urls,
            header=cluster.header,
            barrier=reads.barrier,
            leader_credentials=leader_credentials(config.client_tls),
        )
        self.watches = WatchStreams(state.watch_hub, cluster.header)
        listen = config.listen_peer_urls[0]
        peers = {peer.member_id: (peer.peer.host, peer.peer.port) for peer in config.peers}
        peer_tls = peer_contexts(
            config.listen_peer_urls, config.peers, config.peer_tls, self._rejected("peer")
        )
        if records:  # the recorded members, changed through the log, are the peers
            peers = {r.member_id: peer_address(r) for r in records if r.peer_urls}
        transport = self.transport = PeerTransport(
            self.member_id,
            listen.host,
            listen.port,
            peers,
            self._on_peer_frame,
            attributes=own_attributes(config),
            on_attributes=cluster.on_peer_attributes,
            server_ssl=peer_tls.server,
            client_ssl=peer_tls.client,
            on_query=lambda _query: members_answer(self.cluster_id, cluster.members()),
            removed_peers=lambda: frozenset(state.members().all()[1]),
            on_removed_notice=lambda _peer: self._removed(),
        )
        membership = self.membership = Membership(
            driver,
            state,
            cluster,
            transport,
            cluster_token=config.initial_cluster_token,
            next_request_id=proposals.next_request_id,
            wake=wake,
            on_removed=self._removed,
        )
        applying.conf_applier = membership
        cluster.changes = membership
        snapshots = self.snapshots = Snapshots(
            data,
            driver,
            transport,
            snapshot_count=config.snapshot_count,
            snapshot_index=recovered.snapshot_index,
            metrics=metrics,
            trace=trace,
        )
        raft = self.raft = RaftLoop(
            driver,
            data,
            transport,
            applying=applying,
            reads=reads,
            proposals=proposals,
            snapshots=snapshots,
            persisted=recovered.persisted.hard_state,
            settings=self.pump_settings
            or PumpSettings(ack_before_fsync=failpoints.on("ack_before_fsync")),
            metrics=metrics,
            trace=trace,
            on_soft_state=self._on_soft_state,
            on_failure=self._fail,
        )
        transport.after_read = raft.pump  # the pump runs at the end of each peer read
        await transport.start()
        ports = MemberPorts(
            state=state,
            proposer=proposals,
            reads=reads,
            leases=leases,
            cluster=cluster,
            watches=self.watches,
            max_request_bytes=config.max_request_bytes,
            client_cert_auth=config.client_tls.client_cert_auth,
            bcrypt_cost=bcrypt_cost(config),
        )
        targets = [e.target for e in config.listen_client_urls]
        tls = listener_contexts(
            config.listen_client_urls, config.client_tls, self._rejected("client")
        )
        try:
            # Listening, but answering no client until this member's publish is applied
            # (`_publish`), as etcd serves its clients only once its server is ready.
            self.grpc_server = await start_grpc_server(
                ports, targets, self._metrics_text, tls, accepting=False
            )
        except RuntimeError as error:
            raise MemberStartError(
                f"cannot listen for clients on {', '.join(targets)} ({error}); "
                "is another server using the port? choose --listen-client-urls"
            ) from error
        self.grpc_server.before_call = applying.catch_up
        self.grpc_server.after_read = raft.pump
        self.metrics.handled = self.grpc_server.handled_counts
        for endpoint in config.listen_metrics_urls[:1]:
            self.metrics_server = MetricsServer(
                self.metrics,
                endpoint.host,
                endpoint.port,
                refresh=self._refresh_metrics,
                health=Health(ports).answer,
                hooks=Http1Hooks(before_call=applying.catch_up, after_read=raft.pump),
            )
            await self.metrics_server.start()
        ticker = Ticker(config, driver, state, transport, leases, proposals, wake=wake)
        self._ticker = asyncio.create_task(ticker.run(), name="ticker")
        if len(voters) == 1:
            driver.campaign()
        raft.request_pump()
        self._publisher = asyncio.create_task(self._publish(), name="publish-attributes")

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        for part in (self.proposals, self.reads, self.snapshots):
            if part is not None:
                part.stopping = True
        if self.applying is not None:
            self.applying.stop()
        pump_task = self.raft.stop() if self.raft is not None else None
        tasks = [task for task in (self._ticker, self._publisher, pump_task) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.snapshots is not None:
            await self.snapshots.stop()
        if self.grpc_server is not None:
            await self.grpc_server.stop(grace=0.5)
        if self.transport is not None:
            await self.transport.close()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self.leases is not None:
            await self.leases.close()
        if self.membership is not None:
            await self.membership.close()
        if self.proposals is not None:
            self.proposals.stop()
        if self.reads is not None:
            self.reads.stop(RpcError(errors.STOPPED))
        if self.data is not None:
            self.data.close()
        if self.trace is not None:
            self.trace.close()
        self.stopped.set()
        log.info("member stopped", extra={"member_id": f"{self.member_id:x}"})

    async def _publish(self) -> bool:
        """Publish this member's attributes (server.publish); once they are applied here,
        the cluster view hears, and the client port starts accepting connections (until
        then a client's call waits, to its own deadline, as etcd's do: etcd serves its
        clients only once its publish is applied, its ReadyNotify)."""
        assert self.proposals is not None and self.cluster is not None
        published = await publish_attributes(self.proposals, self.config)
        if published:
            self.cluster.published.set()
            if self.grpc_server is not None:
                await self.grpc_server.start_accepting()
            log.info("ready to serve client requests", extra={"member": self.config.name})
        return published

    def _removed(self) -> None:
        """This member was removed from the cluster (it applied its removal, or a peer
        said so): it stops itself, and the process exits 0, as etcd's does (with etcd's
        words)."""
        if self._stopping or self._removed_seen:
            return
        self._removed_seen = True
        log.warning(
            "server error",
            extra={"error": "the member has been permanently removed from the cluster"},
        )
        log.warning("data-dir used by this member must be removed")
        if self.raft is not None:
            self.raft.stop()
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.stop()))

    def _fail(self, error: Exception) -> None:
        """A fatal error in the raft loop: the member stops, and the first error is the
        one it reports (pumping stops at once, so no later Ready adds a second)."""
        if self.failure is not None:
            return
        log.exception("fatal error in the raft loop; stopping the member")
        self.failure = f"raft loop: {type(error).__name__}: {error}"
        if self.raft is not None:
            self.raft.stop()
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.stop()))

    # ---- who hears of what ---------------------------------------------------------------

    @property
    def applied_index(self) -> int:
        return self.applying.applied_index if self.applying is not None else 0

    def _leader_id(self) -> int:
        return self.cluster.leader_id if self.cluster is not None else NONE

    def _request_pump(self) -> None:
        if self.raft is not None:
            self.raft.request_pump()

    def _on_peer_frame(self, from_id: int, payload: bytes) -> None:
        if self.driver is None or self._stopping:
            return
        try:
            message = raft_codec.decode_message(payload)
        except raft_codec.CodecError:
            log.exception("dropping an undecodable raft message", extra={"from": f"{from_id:x}"})
            return
        self.driver.step(message)
        if self.trace is not None:
            self.trace.event("receive", message=message)
        self._request_pump()

    def _on_soft_state(self, leader_id: int, role: Role) -> None:
        assert self.cluster is not None and self.reads is not None
        assert self.leases is not None and self.applying is not None
        if self.trace is not None:
            self.trace.event("role", leader=leader_id)
        if leader_id != self.cluster.leader_id:
            self.reads.requeue()
            if leader_id != NONE:
                self.metrics.leader_changes_seen += 1
            log.info("leader changed", extra={"leader": f"{leader_id:x}", "role": role.value})
            self.cluster.on_leader(leader_id)
        self.metrics.has_leader = leader_id != NONE
        self.leases.on_role(role, catch_up=self.applying.catch_up)

    def _on_watch_ready(self, handle: int) -> None:
        if self.watches is not None:
            self.watches.on_ready(handle)

    def _rejected(self, port: str) -> Callable[[str], None]:
        """Count and log a connection whose TLS handshake failed on `port` (as etcd logs
        "rejected connection")."""

        def rejected(reason: str) -> None:
            self.metrics.tls_rejected_connections += 1
            log.warning("rejected connection", extra={"port": port, "error": reason})

        return rejected

    def _metrics_text(self) -> str:
        """The metrics as Prometheus text, sizes current (the client port's /metrics)."""
        self._refresh_metrics()
        return self.metrics.render()

    def _refresh_metrics(self) -> None:
        if self.data is not None:
            self.metrics.db_size_bytes, self.metrics.db_size_in_use_bytes = self.data.state.sizes()
