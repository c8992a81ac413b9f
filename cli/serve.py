"""`etcdspec serve`: run one member of the reference server, with etcd's flags.

A thin layer: the flags become an etcdspec.impl.server.config.MemberConfig (bad values exit 2
with a message naming the flag), then etcdspec.impl.server.process.run_member serves until
SIGTERM or SIGINT. Logs are JSON lines on stderr.
"""

from __future__ import annotations

import click

from etcdspec.cli.errors import CliError
from etcdspec.exitcodes import ExitCode


@click.command()
@click.option("--name", default="default", show_default=True, help="Human-readable member name.")
@click.option("--data-dir", default=None, help="Path to the data directory (default NAME.etcd).")
@click.option("--listen-client-urls", default="http://127.0.0.1:2379", show_default=True)
@click.option("--advertise-client-urls", default=None)
@click.option("--listen-peer-urls", default="http://127.0.0.1:2380", show_default=True)
@click.option("--initial-advertise-peer-urls", default=None)
@click.option("--initial-cluster", default=None, help="NAME=URL,... (default: this member).")
@click.option("--initial-cluster-state", default="new", type=click.Choice(["new", "existing"]))
@click.option("--initial-cluster-token", default="etcd-cluster", show_default=True)
@click.option("--heartbeat-interval", default=100, show_default=True, help="Milliseconds.")
@click.option("--election-timeout", default=1000, show_default=True, help="Milliseconds.")
@click.option("--quota-backend-bytes", default=0, help="0 means the default, 2 GiB.")
@click.option("--snapshot-count", default=100_000, show_default=True)
@click.option("--auto-compaction-retention", default="0", show_default=True)
@click.option("--max-request-bytes", default=1_572_864, show_default=True)
@click.option("--listen-metrics-urls", default=None)
@click.option("--trace", "trace_file", default=None, help="Write a raft trace (NDJSON) here.")
@click.option("--seed", default=0, show_default=True, help="Seed for election jitter.")
@click.option(
    "--fault-file",
    default=None,
    help="etcdspec only, for fault-injection tests: a JSON file naming peers to cut off.",
)
@click.option(
    "--auth-token",
    default="simple",
    show_default=True,
    help="simple, or jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256|ES256|...[,ttl=5m].",
)
@click.option("--auth-token-ttl", default=300, show_default=True, help="Simple tokens' TTL, s.")
@click.option(
    "--bcrypt-cost",
    default=10,
    show_default=True,
    help="bcrypt cost of password hashes (4..31; else 10, as etcd).",
)
@click.option("--cert-file", default="", help="Client port TLS: certificate (PEM).")
@click.option("--key-file", default="", help="Client port TLS: the certificate's key (PEM).")
@click.option("--trusted-ca-file", default="", help="Client certificates must be signed by it.")
@click.option("--client-cert-auth", is_flag=True, help="A client certificate's CN is its user.")
@click.option("--peer-cert-file", default="", help="Peer TLS: certificate (PEM).")
@click.option("--peer-key-file", default="", help="Peer TLS: the certificate's key (PEM).")
@click.option("--peer-trusted-ca-file", default="", help="Peers' certificates' CA (PEM).")
@click.option("--peer-client-cert-auth", is_flag=True, help="Peers must present a certificate.")
def serve(
    name: str,
    data_dir: str | None,
    listen_client_urls: str,
    advertise_client_urls: str | None,
    listen_peer_urls: str,
    initial_advertise_peer_urls: str | None,
    initial_cluster: str | None,
    initial_cluster_state: str,
    initial_cluster_token: str,
    heartbeat_interval: int,
    election_timeout: int,
    quota_backend_bytes: int,
    snapshot_count: int,
    auto_compaction_retention: str,
    max_request_bytes: int,
    listen_metrics_urls: str | None,
    trace_file: str | None,
    seed: int,
    fault_file: str | None,
    auth_token: str,
    auth_token_ttl: int,
    bcrypt_cost: int,
    cert_file: str,
    key_file: str,
    trusted_ca_file: str,
    client_cert_auth: bool,
    peer_cert_file: str,
    peer_key_file: str,
    peer_trusted_ca_file: str,
    peer_client_cert_auth: bool,
) -> int:
    """Run one member of the reference server (etcd's flags)."""
    from etcdspec.impl.server.config import DEFAULT_QUOTA_BYTES, ConfigError, build_config
    from etcdspec.impl.server.process import run_member
    from etcdspec.impl.server.tls import TlsFiles

    try:
        config = build_config(
            name=name,
            data_dir=data_dir or f"{name}.etcd",
            listen_client_urls=listen_client_urls,
            advertise_client_urls=advertise_client_urls,
            listen_peer_urls=listen_peer_urls,
            initial_advertise_peer_urls=initial_advertise_peer_urls,
            initial_cluster=initial_cluster,
            initial_cluster_state=initial_cluster_state,
            initial_cluster_token=initial_cluster_token,
            heartbeat_interval_ms=heartbeat_interval,
            election_timeout_ms=election_timeout,
            quota_backend_bytes=quota_backend_bytes or DEFAULT_QUOTA_BYTES,
            snapshot_count=snapshot_count,
            auto_compaction_retention=auto_compaction_retention,
            max_request_bytes=max_request_bytes,
            listen_metrics_urls=listen_metrics_urls,
            trace_file=trace_file,
            seed=seed,
            fault_file=fault_file,
            auth_token=auth_token,
            auth_token_ttl_s=auth_token_ttl,
            bcrypt_cost=bcrypt_cost,
            client_tls=TlsFiles(cert_file, key_file, trusted_ca_file, client_cert_auth),
            peer_tls=TlsFiles(
                peer_cert_file,
                peer_key_file,
                peer_trusted_ca_file,
                peer_client_cert_auth,
                prefix="peer-",
            ),
        )
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from error
    return int(run_member(config))
