"""Config parsing (etcd's flag names and forms) and the error catalogue."""

from __future__ import annotations

import grpc
import pytest

from etcdspec.impl import errors
from etcdspec.impl.server.config import ConfigError, build_config, parse_initial_cluster, parse_url


def _config(**overrides: object) -> object:
    base: dict[str, object] = {
        "name": "m1",
        "data_dir": "/tmp/x",
        "listen_client_urls": "http://127.0.0.1:2379",
        "advertise_client_urls": None,
        "listen_peer_urls": "http://127.0.0.1:2380",
        "initial_advertise_peer_urls": None,
        "initial_cluster": "m1=http://127.0.0.1:2380,m2=http://127.0.0.1:2381",
    }
    base.update(overrides)
    return build_config(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("http://127.0.0.1:2379", "127.0.0.1", 2379),
        ("http://localhost:1", "127.0.0.1", 1),
        (" http://127.0.0.1:65535 ", "127.0.0.1", 65535),
    ],
)
def test_loopback_urls_parse(text: str, host: str, port: int) -> None:
    endpoint = parse_url(text, "--listen-client-urls")
    assert (endpoint.host, endpoint.port) == (host, port)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("http://10.0.0.1:2379", "loopback"),
        ("ftp://127.0.0.1:2379", "scheme"),
        ("http://127.0.0.1", "PORT"),
        ("http://127.0.0.1:99999", "bad port"),
    ],
)
def test_bad_urls_name_the_flag_and_the_fix(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match="--listen-client-urls") as caught:
        parse_url(text, "--listen-client-urls")
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("m1", "NAME=URL"),
        ("m1=http://127.0.0.1:1,m1=http://127.0.0.1:2", "twice"),
        ("", "empty"),
    ],
)
def test_bad_initial_cluster_is_rejected(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        parse_initial_cluster(text)


def test_member_ids_are_distinct_and_stable() -> None:
    first = _config()
    second = _config(name="m2", listen_peer_urls="http://127.0.0.1:2381")
    assert first.member_id != second.member_id  # type: ignore[attr-defined]
    assert first.cluster_id == second.cluster_id  # type: ignore[attr-defined]
    assert _config().member_id == first.member_id  # type: ignore[attr-defined]
    assert 0 < first.member_id < 2**63  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"name": "m9"}, "does not name this member"),
        ({"initial_cluster_state": "old"}, "--initial-cluster-state"),
        ({"election_timeout_ms": 100}, "--election-timeout"),
        ({"snapshot_count": 0}, "--snapshot-count"),
        ({"auth_token": "opaque"}, "--auth-token 'opaque': use 'simple'"),
        ({"auth_token": "jwt,sign-method=RS256"}, "pub-key=PATH and priv-key=PATH"),
    ],
)
def test_bad_member_config_is_rejected(overrides: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        _config(**overrides)


def test_election_ticks_count_heartbeats() -> None:
    config = _config(heartbeat_interval_ms=50, election_timeout_ms=500)
    assert config.election_ticks == 10  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "code", "text"),
    [
        (errors.EMPTY_KEY, grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key is not provided"),
        (errors.COMPACTED, grpc.StatusCode.OUT_OF_RANGE, "required revision has been compacted"),
        (errors.LEASE_NOT_FOUND, grpc.StatusCode.NOT_FOUND, "requested lease not found"),
        (errors.NO_SPACE, grpc.StatusCode.RESOURCE_EXHAUSTED, "database space exceeded"),
    ],
)
def test_error_catalogue_matches_etcd(
    kind: errors.EtcdErrorKind, code: grpc.StatusCode, text: str
) -> None:
    assert kind.code == code
    assert text in kind.message
    assert errors.kind_by_message(kind.message) == kind
