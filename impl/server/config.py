"""A member's configuration, named and defaulted as etcd's flags are.

`MemberConfig` is the parsed, validated form of `etcdspec serve`'s flags (`--name`,
`--data-dir`, `--listen-client-urls`, `--initial-cluster`, ...). Parsing never touches
the network or the disk: `parse_initial_cluster` and `parse_urls` check the text and
raise `ConfigError` saying which flag was wrong and what it should look like. Only
loopback addresses are accepted (this server is a local reference, not a product).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from etcdspec.impl.kv.auth_tokens import TokenConfigError, token_provider
from etcdspec.impl.server.tls import TlsError, TlsFiles

DEFAULT_HEARTBEAT_MS = 100
DEFAULT_ELECTION_MS = 1000
DEFAULT_QUOTA_BYTES = 2 * 1024 * 1024 * 1024
DEFAULT_SNAPSHOT_COUNT = 100_000
DEFAULT_MAX_REQUEST_BYTES = 1_572_864  # etcd's --max-request-bytes: 1.5 MiB
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
NO_CLIENT_TLS = TlsFiles()
DEFAULT_BCRYPT_COST = 10  # etcd's --bcrypt-cost default (bcrypt.DefaultCost)
BCRYPT_COSTS = range(4, 32)  # bcrypt's MinCost..MaxCost


def effective_bcrypt_cost(given: int) -> tuple[int, str | None]:
    """The cost passwords are hashed with, and a warning: etcd 3.5 does not refuse a
    cost outside 4..31, it logs "use default bcrypt cost instead of the invalid given
    cost" and uses 10; so do we."""
    if given in BCRYPT_COSTS:
        return given, None
    return DEFAULT_BCRYPT_COST, (
        f"use default bcrypt cost instead of the invalid given cost (given {given}, "
        f"min {BCRYPT_COSTS.start}, max {BCRYPT_COSTS.stop - 1}, default {DEFAULT_BCRYPT_COST})"
    )


NO_PEER_TLS = TlsFiles(prefix="peer-")


class ConfigError(ValueError):
    """A flag's value is wrong; the message names the flag and the expected form."""


@dataclass(frozen=True)
class Endpoint:
    """One `scheme://host:port` URL of a member, loopback only."""

    host: str
    port: int
    scheme: str = "http"  # or "https": served with TLS (etcdspec.impl.server.tls)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        return self.url


def parse_url(text: str, flag: str) -> Endpoint:
    """Parse one URL of a flag; http or https on a loopback host with an explicit port."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https", "unix", ""):
        raise ConfigError(
            f"{flag}: {text!r} uses scheme {parts.scheme!r}; "
            "use http://127.0.0.1:PORT or https://127.0.0.1:PORT"
        )
    host = parts.hostname
    try:
        port = parts.port
    except ValueError as error:
        raise ConfigError(f"{flag}: {text!r} has a bad port ({error})") from error
    if host is None or port is None:
        raise ConfigError(f"{flag}: {text!r} is not of the form http://127.0.0.1:PORT")
    if host not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"{flag}: {text!r} is not a loopback address; this server listens on 127.0.0.1 only"
        )
    return Endpoint(
        host="127.0.0.1" if host == "localhost" else host,
        port=port,
        scheme="https" if parts.scheme == "https" else "http",
    )


def parse_urls(text: str, flag: str) -> tuple[Endpoint, ...]:
    """Parse a comma-separated list of URLs (etcd's form for every *-urls flag)."""
    items = [item for item in text.split(",") if item.strip()]
    if not items:
        raise ConfigError(f"{flag}: no URL given; use http://127.0.0.1:PORT")
    return tuple(parse_url(item, flag) for item in items)


def parse_initial_cluster(text: str) -> tuple[tuple[str, Endpoint], ...]:
    """Parse `--initial-cluster name=url,name=url` into (name, peer endpoint) pairs."""
    members: list[tuple[str, Endpoint]] = []
    seen: set[str] = set()
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, url = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(
                f"--initial-cluster: {item!r} is not NAME=URL; "
                "use e.g. m1=http://127.0.0.1:2380,m2=http://127.0.0.1:2381"
            )
        name = name.strip()
        if name in seen:
            raise ConfigError(f"--initial-cluster: member name {name!r} appears twice")
        seen.add(name)
        members.append((name, parse_url(url, "--initial-cluster")))
    if not members:
        raise ConfigError("--initial-cluster: empty; give at least NAME=URL")
    return tuple(members)


def member_id_of(name: str, peer_url: str, cluster_token: str) -> int:
    """A member's id, derived (as etcd does) from its peer URL and the token.

    etcd's ids are uint64; ours keep the top bit clear (63 bits) so that every store
    that keeps them as a signed 64-bit integer (SQLite) can hold them.
    """
    digest = hashlib.sha1(f"{peer_url}{cluster_token}{name}".encode()).digest()
    value = int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)
    return value or 1


def cluster_id_of(member_ids: tuple[int, ...], cluster_token: str) -> int:
    """The cluster's 64-bit id, derived from the sorted member ids and the token."""
    text = ",".join(str(member_id) for member_id in sorted(member_ids)) + cluster_token
    value = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big")
    return value or 1


@dataclass(frozen=True)
class PeerInfo:
    """A member of the initial cluster: its name, id and peer endpoint."""

    name: str
    member_id: int
    peer: Endpoint

    def describe(self) -> str:
        return f"{self.name}({self.member_id:x})@{self.peer.url}"


@dataclass(frozen=True)
class MemberConfig:
    """Everything a member needs to start, in etcd's terms."""

    name: str
    data_dir: str
    listen_client_urls: tuple[Endpoint, ...]
    advertise_client_urls: tuple[Endpoint, ...]
    listen_peer_urls: tuple[Endpoint, ...]
    initial_advertise_peer_urls: tuple[Endpoint, ...]
    initial_cluster: tuple[tuple[str, Endpoint], ...]
    initial_cluster_state: str = "new"
    initial_cluster_token: str = "etcd-cluster"
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_MS
    election_timeout_ms: int = DEFAULT_ELECTION_MS
    quota_backend_bytes: int = DEFAULT_QUOTA_BYTES
    snapshot_count: int = DEFAULT_SNAPSHOT_COUNT
    auto_compaction_retention: str = "0"
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    listen_metrics_urls: tuple[Endpoint, ...] = ()
    trace_file: str | None = None
    seed: int = 0
    fault_file: str | None = None  # etcdspec only: fault injection for tests (see peer.py)
    auth_token: str = "simple"  # etcd's --auth-token: simple, or jwt,pub-key=...,...
    auth_token_ttl_s: int = 300  # etcd's --auth-token-ttl (simple tokens), seconds
    peers: tuple[PeerInfo, ...] = field(default=())
    bcrypt_cost: int = DEFAULT_BCRYPT_COST  # etcd's --bcrypt-cost, as given
    client_tls: TlsFiles = NO_CLIENT_TLS  # --cert-file, --key-file, --trusted-ca-file, ...
    peer_tls: TlsFiles = NO_PEER_TLS  # the --peer-* set
    # A member that joined an existing cluster runs with the cluster's id (server.join).
    cluster_id_override: int = 0

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("--name: empty; give the member a name")
        if self.initial_cluster_state not in ("new", "existing"):
            raise ConfigError(
                f"--initial-cluster-state: {self.initial_cluster_state!r}; use new or existing"
            )
        if self.heartbeat_interval_ms <= 0:
            raise ConfigError("--heartbeat-interval: must be a positive number of milliseconds")
        if self.election_timeout_ms < 5 * self.heartbeat_interval_ms:
            raise ConfigError(
                "--election-timeout: must be at least 5 times --heartbeat-interval "
                f"(got {self.election_timeout_ms} ms vs {self.heartbeat_interval_ms} ms)"
            )
        if self.snapshot_count <= 0:
            raise ConfigError("--snapshot-count: must be positive")
        if self.quota_backend_bytes < 0:
            raise ConfigError("--quota-backend-bytes: must not be negative")
        names = [name for name, _ in self.initial_cluster]
        if self.name not in names:
            raise ConfigError(
                f"--initial-cluster: does not name this member {self.name!r} "
                f"(names: {', '.join(names)}); add {self.name}=<peer url>"
            )
        if not self.peers:
            peers = tuple(
                PeerInfo(
                    name=name,
                    member_id=member_id_of(name, endpoint.url, self.initial_cluster_token),
                    peer=endpoint,
                )
                for name, endpoint in self.initial_cluster
            )
            object.__setattr__(self, "peers", peers)

    @property
    def member_id(self) -> int:
        return self.peer_by_name(self.name).member_id

    @property
    def cluster_id(self) -> int:
        if self.cluster_id_override:
            return self.cluster_id_override
        return cluster_id_of(
            tuple(peer.member_id for peer in self.peers), self.initial_cluster_token
        )

    @property
    def election_ticks(self) -> int:
        """The election timeout counted in heartbeat ticks (etcd's ElectionTick)."""
        return max(2, self.election_timeout_ms // self.heartbeat_interval_ms)

    @property
    def compaction_retention_revisions(self) -> int:
        """--auto-compaction-retention read in revision mode; 0 switches it off."""
        try:
            return max(0, int(self.auto_compaction_retention))
        except ValueError as error:
            raise ConfigError(
                f"--auto-compaction-retention: {self.auto_compaction_retention!r}; "
                "give a number of revisions"
            ) from error

    def peer_by_name(self, name: str) -> PeerInfo:
        for peer in self.peers:
            if peer.name == name:
                return peer
        raise ConfigError(f"no member named {name!r} in --initial-cluster")

    def peer_by_id(self, member_id: int) -> PeerInfo:
        for peer in self.peers:
            if peer.member_id == member_id:
                return peer
        raise ConfigError(f"no member with id {member_id:x} in --initial-cluster")

    def describe(self) -> str:
        return (
            f"member {self.name} ({self.member_id:x}) of cluster {self.cluster_id:x}: "
            f"clients {','.join(e.url for e in self.listen_client_urls)}, "
            f"peers {','.join(p.describe() for p in self.peers)}, data {self.data_dir}"
        )


def build_config(
    *,
    name: str,
    data_dir: str,
    listen_client_urls: str,
    advertise_client_urls: str | None,
    listen_peer_urls: str,
    initial_advertise_peer_urls: str | None,
    initial_cluster: str | None,
    initial_cluster_state: str = "new",
    initial_cluster_token: str = "etcd-cluster",
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_MS,
    election_timeout_ms: int = DEFAULT_ELECTION_MS,
    quota_backend_bytes: int = DEFAULT_QUOTA_BYTES,
    snapshot_count: int = DEFAULT_SNAPSHOT_COUNT,
    auto_compaction_retention: str = "0",
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    listen_metrics_urls: str | None = None,
    trace_file: str | None = None,
    seed: int = 0,
    fault_file: str | None = None,
    auth_token: str = "simple",
    auth_token_ttl_s: int = 300,
    client_tls: TlsFiles | None = None,
    peer_tls: TlsFiles | None = None,
    bcrypt_cost: int = DEFAULT_BCRYPT_COST,
) -> MemberConfig:
    """Build a MemberConfig from flag texts, defaulting as etcd does."""
    try:
        token_provider(auth_token, auth_token_ttl_s)
    except TokenConfigError as error:
        raise ConfigError(str(error)) from error
    client_tls = client_tls or NO_CLIENT_TLS
    peer_tls = peer_tls or NO_PEER_TLS
    clients = parse_urls(listen_client_urls, "--listen-client-urls")
    peers = parse_urls(listen_peer_urls, "--listen-peer-urls")
    advertised_peers = (
        parse_urls(initial_advertise_peer_urls, "--initial-advertise-peer-urls")
        if initial_advertise_peer_urls
        else peers
    )
    cluster = (
        parse_initial_cluster(initial_cluster)
        if initial_cluster
        else ((name, advertised_peers[0]),)
    )
    config = MemberConfig(
        name=name,
        data_dir=data_dir,
        listen_client_urls=clients,
        advertise_client_urls=(
            parse_urls(advertise_client_urls, "--advertise-client-urls")
            if advertise_client_urls
            else clients
        ),
        listen_peer_urls=peers,
        initial_advertise_peer_urls=advertised_peers,
        initial_cluster=cluster,
        initial_cluster_state=initial_cluster_state,
        initial_cluster_token=initial_cluster_token,
        heartbeat_interval_ms=heartbeat_interval_ms,
        election_timeout_ms=election_timeout_ms,
        quota_backend_bytes=quota_backend_bytes,
        snapshot_count=snapshot_count,
        auto_compaction_retention=auto_compaction_retention,
        max_request_bytes=max_request_bytes,
        listen_metrics_urls=(
            parse_urls(listen_metrics_urls, "--listen-metrics-urls") if listen_metrics_urls else ()
        ),
        trace_file=trace_file,
        seed=seed,
        fault_file=fault_file,
        auth_token=auth_token,
        auth_token_ttl_s=auth_token_ttl_s,
        client_tls=client_tls,
        peer_tls=peer_tls,
        bcrypt_cost=bcrypt_cost,
    )
    check_tls(config)
    return config


def check_tls(config: MemberConfig) -> None:
    """etcd's TLS rules at start: an https URL needs its certificate and key; every TLS
    file loads (ConfigError naming the flag and the file otherwise)."""
    try:
        for endpoint in config.listen_client_urls:
            config.client_tls.require_for(endpoint.url, "client")
        for endpoint in config.listen_peer_urls:
            config.peer_tls.require_for(endpoint.url, "peer")
        # As etcd, files given for http URLs only are not used, so not loaded either.
        if any(e.scheme == "https" for e in config.listen_client_urls):
            config.client_tls.check()
        dialled = tuple(peer.peer for peer in config.peers)
        if any(e.scheme == "https" for e in config.listen_peer_urls + dialled):
            config.peer_tls.check()
    except TlsError as error:
        raise ConfigError(str(error)) from error
