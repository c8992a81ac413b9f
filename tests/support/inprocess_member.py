"""Test helper: the configuration of a member run in-process on free loopback ports."""

from __future__ import annotations

from pathlib import Path

from etcdspec.impl.server.config import MemberConfig, build_config
from etcdspec.impl.tools.launcher import free_ports


def member_config(data_dir: Path, **overrides: object) -> MemberConfig:
    """A single-member cluster named "solo" with a 20 ms heartbeat and a 200 ms election
    timeout, unless `overrides` (build_config's keywords) say otherwise."""
    client, peer = free_ports(2)
    options: dict[str, object] = {
        "name": "solo",
        "data_dir": str(data_dir),
        "listen_client_urls": f"http://127.0.0.1:{client}",
        "advertise_client_urls": None,
        "listen_peer_urls": f"http://127.0.0.1:{peer}",
        "initial_advertise_peer_urls": None,
        "initial_cluster": None,
        "heartbeat_interval_ms": 20,
        "election_timeout_ms": 200,
    }
    options.update(overrides)
    return build_config(**options)  # type: ignore[arg-type]
