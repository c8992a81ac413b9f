"""TLS on the client and peer ports, side by side with etcd 3.5.1 (certificates made with
trustme in the test, never committed).

The same etcdctl script runs against a one-member cluster of ours and of etcd started
with the same flags (`--cert-file`, `--key-file`, `--trusted-ca-file`, `--client-cert-auth`,
https:// URLs), and the transcripts (output and exit code of each step) must be equal:
a client with the CA and a certificate writes; no client certificate, one from another
CA, a plaintext client on the TLS port, and a TLS client on a plaintext port all fail
and change nothing; with auth enabled a certificate's common name is the user (a user
with the permission writes, one without is denied) and a `--user` login wins over it.
A Python gRPC client over TLS sees the same. Peers: a three-member cluster over https
peer URLs serves writes; a member whose peer certificate comes from another CA never
joins (the others refuse its handshake, it refuses theirs).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.server.metrics import parse_prometheus
from etcdspec.impl.tools import launcher
from etcdspec.impl.tools.certs import ClusterCerts
from tests.support import etcd_procs
from tests.support.tls_certs import foreign_client, foreign_member, trustme_certs

pytestmark = [
    pytest.mark.skipif(etcd_procs.ETCD_BIN is None, reason="needs etcd"),
    pytest.mark.skipif(etcd_procs.ETCDCTL_35 is None, reason="needs etcdctl 3.5"),
    pytest.mark.timeout(240),
]

USERS = ("root", "alice", "bob")
FAST_FAIL = ("--command-timeout=2s", "--dial-timeout=1s")
BINARY = etcd_procs.ETCDCTL_35


def _run(endpoints: list[str], *args: str) -> str:
    result = etcd_procs.etcdctl(endpoints, *FAST_FAIL, *args, binary=etcd_procs.ETCDCTL_35)
    lines = [line for line in result.stderr.splitlines() if not line.startswith('{"level"')]
    return f"rc={result.returncode} out={result.stdout.strip()!r} err={' '.join(lines)!r}"


def _tls(certs: ClusterCerts, user: str | None) -> list[str]:
    flags = [f"--cacert={certs.ca_file}"]
    if user is not None:
        files = certs.client(user)
        flags += [f"--cert={files.cert}", f"--key={files.key}"]
    return flags


def secured_transcript(kind: str, tmp_path: Path, certs: ClusterCerts) -> list[str]:
    """The etcdctl script of the module docstring against one secured member of `kind`."""
    _, mallory = foreign_client(tmp_path, "mallory")
    security = launcher.SecurityPlan(certs, client_cert_auth=True)
    with etcd_procs.cluster(kind, tmp_path / kind, size=1, security=security) as running:
        https = running.endpoints
        assert https[0].startswith("https://")
        plain = [https[0].replace("https://", "http://")]
        root = [*_tls(certs, "root")]
        mallory_flags = [
            f"--cacert={certs.ca_file}",
            f"--cert={mallory.cert}",
            f"--key={mallory.key}",
        ]
        steps: list[tuple[str, list[str], list[str]]] = [
            ("put with CA and client cert", https, [*root, "put", "a", "1"]),
            ("no client certificate", https, [*_tls(certs, None), "put", "a", "2"]),
            (
                "client certificate from another CA",
                https,
                [*mallory_flags, "put", "a", "3"],
            ),
            ("plaintext client on the TLS port", plain, ["put", "a", "4"]),
            ("nothing changed", https, [*root, "get", "a", "-w", "simple"]),
            ("user add root", https, [*root, "user", "add", "root", "--new-user-password=r"]),
            ("grant root", https, [*root, "user", "grant-role", "root", "root"]),
            ("user add alice", https, [*root, "user", "add", "alice", "--new-user-password=a"]),
            ("user add bob", https, [*root, "user", "add", "bob", "--new-user-password=b"]),
            ("role add writer", https, [*root, "role", "add", "writer"]),
            (
                "grant k to writer",
                https,
                [*root, "role", "grant-permission", "writer", "readwrite", "k"],
            ),
            ("alice is a writer", https, [*root, "user", "grant-role", "alice", "writer"]),
            ("auth enable", https, [*root, "auth", "enable"]),
            ("CN alice puts k", https, [*_tls(certs, "alice"), "put", "k", "v1"]),
            ("CN bob puts k", https, [*_tls(certs, "bob"), "put", "k", "v2"]),
            ("CN bob reads k", https, [*_tls(certs, "bob"), "get", "k"]),
            (
                "CN bob as --user alice",
                https,
                [*_tls(certs, "bob"), "--user=alice:a", "put", "k", "v3"],
            ),
            (
                "CN alice as --user bob",
                https,
                [*_tls(certs, "alice"), "--user=bob:b", "put", "k", "v4"],
            ),
            (
                "CN alice wrong password",
                https,
                [*_tls(certs, "alice"), "--user=alice:x", "get", "k"],
            ),
            ("CN root lists users", https, [*root, "user", "list"]),
            ("CN alice lists users", https, [*_tls(certs, "alice"), "user", "list"]),
            ("k as written", https, [*root, "get", "k", "--print-value-only"]),
            ("auth disable", https, [*root, "auth", "disable"]),
        ]
        transcript = [f"{name}: {_run(endpoints, *args)}" for name, endpoints, args in steps]
        if kind == "ours":  # each refused handshake counted and logged, as etcd logs it
            metrics_url = f"{running.plan.members[0].metrics_url}/metrics"
            with urllib.request.urlopen(metrics_url, timeout=5) as page:
                samples = parse_prometheus(page.read().decode())
            assert samples["etcdspec_tls_rejected_connections_total"] >= 3, samples
            assert '"msg": "rejected connection"' in Path(running.members[0].log_path).read_text()
        return transcript


def test_etcdctl_over_tls_with_cert_users_matches_etcd(tmp_path: Path) -> None:
    certs = trustme_certs(tmp_path, USERS)
    ours = secured_transcript("ours", tmp_path, certs)
    etcd = secured_transcript("etcd", tmp_path, certs)
    assert ours == etcd, "\n".join(
        f"ours {o}\netcd {e}" for o, e in zip(ours, etcd, strict=True) if o != e
    )
    by_step = dict(line.split(": ", 1) for line in ours)
    assert by_step["put with CA and client cert"].startswith("rc=0 out='OK'")
    for refused in (
        "no client certificate",
        "client certificate from another CA",
        "plaintext client on the TLS port",
    ):
        assert by_step[refused].startswith("rc=1"), by_step[refused]
    assert "'a\\n1'" in by_step["nothing changed"]
    assert by_step["CN alice puts k"].startswith("rc=0")
    assert "permission denied" in by_step["CN bob puts k"]
    assert by_step["CN bob as --user alice"].startswith("rc=0")
    assert "permission denied" in by_step["CN alice as --user bob"]
    assert "authentication failed" in by_step["CN alice wrong password"]
    assert "alice" in by_step["CN root lists users"]
    assert "permission denied" in by_step["CN alice lists users"]
    assert by_step["k as written"] == "rc=0 out='v3' err=''"


@pytest.mark.parametrize("kind", ["ours", "etcd"])
def test_tls_client_on_a_plaintext_port_fails_and_changes_nothing(
    kind: str, tmp_path: Path
) -> None:
    certs = trustme_certs(tmp_path)
    with etcd_procs.cluster(kind, tmp_path / kind, size=1) as running:
        plain = running.endpoints
        assert _run(plain, "put", "a", "1").startswith("rc=0")
        secure = [plain[0].replace("http://", "https://")]
        refused = _run(secure, *_tls(certs, "root"), "put", "a", "2")
        assert refused.startswith("rc=1") and "deadline exceeded" in refused, refused
        assert _run(plain, "get", "a", "--print-value-only") == "rc=0 out='1' err=''"


def _grpc_answers(kind: str, tmp_path: Path, certs: ClusterCerts) -> list[str]:
    other_ca, mallory = foreign_client(tmp_path, "mallory")
    security = launcher.SecurityPlan(certs, client_cert_auth=True)
    answers = []
    with etcd_procs.cluster(kind, tmp_path / kind, size=1, security=security) as running:
        target = running.endpoints[0].removeprefix("https://")
        good = launcher.channel_credentials(security, "root")
        with grpc.secure_channel(target, good) as channel:
            kv = rpc_pb2_grpc.KVStub(channel)
            put = kv.Put(rpc_pb2.PutRequest(key=b"g", value=b"1"), timeout=5)
            got = kv.Range(rpc_pb2.RangeRequest(key=b"g"), timeout=5)
            answers.append(f"put rev {put.header.revision}, read {got.kvs[0].value!r}")
        ca = Path(certs.ca_file).read_bytes()
        wrong_client = grpc.ssl_channel_credentials(
            ca, Path(mallory.key).read_bytes(), Path(mallory.cert).read_bytes()
        )
        wrong_server = grpc.ssl_channel_credentials(
            Path(other_ca).read_bytes(),
            Path(certs.client("root").key).read_bytes(),
            Path(certs.client("root").cert).read_bytes(),
        )
        for name, credentials in (
            ("client cert from another CA", wrong_client),
            ("no client cert", grpc.ssl_channel_credentials(ca)),
            ("server from an untrusted CA", wrong_server),
        ):
            with grpc.secure_channel(target, credentials) as channel:
                try:
                    rpc_pb2_grpc.KVStub(channel).Put(
                        rpc_pb2.PutRequest(key=b"g", value=b"2"), timeout=2
                    )
                    answers.append(f"{name}: accepted")
                except grpc.RpcError as error:
                    answers.append(f"{name}: {error.code().name}")
        with grpc.secure_channel(target, good) as channel:
            got = rpc_pb2_grpc.KVStub(channel).Range(rpc_pb2.RangeRequest(key=b"g"), timeout=5)
            answers.append(f"after: {got.kvs[0].value!r} version {got.kvs[0].version}")
    return answers


def test_grpc_client_over_tls_matches_etcd(tmp_path: Path) -> None:
    certs = trustme_certs(tmp_path)
    ours = _grpc_answers("ours", tmp_path, certs)
    etcd = _grpc_answers("etcd", tmp_path, certs)
    assert ours == etcd
    assert ours == [
        "put rev 2, read b'1'",
        "client cert from another CA: UNAVAILABLE",
        "no client cert: UNAVAILABLE",
        "server from an untrusted CA: UNAVAILABLE",
        "after: b'1' version 1",
    ]


def test_peer_tls_cluster_serves_writes_and_a_member_from_another_ca_never_joins(
    tmp_path: Path,
) -> None:
    certs = trustme_certs(tmp_path)
    security = launcher.SecurityPlan(certs, client_cert_auth=False)
    plan = launcher.plan_cluster(
        tmp_path / "ours", 3, heartbeat_ms=50, election_ms=500, security=security
    )
    assert plan.initial_cluster.count("https://") == 3
    other_ca, intruder = foreign_member(tmp_path)
    program = launcher.ours_program()
    running: list[launcher.RunningMember] = []
    try:
        for member in plan.members[:2]:
            running.append(launcher.start_member(plan, member, program))
        # m3 has a peer certificate (and trusts a CA) the others do not know.
        m3 = plan.members[2]
        argv = launcher.member_argv(plan, m3, program)
        swap = {
            f"--peer-cert-file={certs.server.cert}": f"--peer-cert-file={intruder.cert}",
            f"--peer-key-file={certs.server.key}": f"--peer-key-file={intruder.key}",
            f"--peer-trusted-ca-file={certs.ca_file}": f"--peer-trusted-ca-file={other_ca}",
        }
        assert all(flag in argv for flag in swap)
        argv = [swap.get(arg, arg) for arg in argv]
        log = tmp_path / "m3.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=out, start_new_session=True)
        running.append(
            launcher.RunningMember(
                plan=m3, pid=process.pid, argv=argv, log_path=str(log), process=process
            )
        )
        credentials = launcher.channel_credentials(security)
        two = plan.endpoints[:2]
        launcher.wait_ready(two, timeout_s=60, credentials=credentials)
        for index in range(5):
            assert _run(two, *_tls(certs, "root"), "put", f"p{index}", str(index)).startswith(
                "rc=0"
            )
        etcd_procs_get = _run(two[1:], *_tls(certs, "root"), "get", "p", "--prefix", "--keys-only")
        assert etcd_procs_get.count("p") >= 5, etcd_procs_get
        # m3 never hears of a leader nor of the writes, however long it waits: its
        # metrics say so, and it serves no client (as etcd's, not before its publish).
        time.sleep(2.0)
        with urllib.request.urlopen(f"{m3.metrics_url}/metrics", timeout=5) as page:
            samples = parse_prometheus(page.read().decode())
        assert samples["etcd_server_has_leader"] == 0, samples
        assert samples["etcd_server_proposals_applied_total"] == 0, samples
        with pytest.raises(launcher.LauncherError, match="DEADLINE_EXCEEDED"):
            launcher.probe_status(plan.endpoints[2], credentials=credentials)
        m1_log = Path(running[0].log_path).read_text()
        assert '"msg": "TLS handshake with peer failed"' in m1_log  # the intruder's
        assert "CERTIFICATE_VERIFY_FAILED" in m1_log
        members = _run(two, *_tls(certs, "root"), "member", "list")
        assert members.count("https://127.0.0.1") >= 3, members
    finally:
        launcher.stop_members(running)


def _peer_tls_transcript(kind: str, tmp_path: Path, certs: ClusterCerts) -> list[str]:
    security = launcher.SecurityPlan(certs, client_cert_auth=False)
    with etcd_procs.cluster(kind, tmp_path / kind, size=3, security=security) as running:
        assert running.plan.initial_cluster.count("=https://") == 3
        root = _tls(certs, "root")
        first, last = running.endpoints[:1], running.endpoints[2:]
        lines = [_run(first, *root, "put", f"w{index}", str(index)) for index in range(5)]
        lines.append(_run(last, *root, "get", "w", "--prefix", "--print-value-only"))
        members = _run(first, *root, "member", "list", "-w", "simple")
        lines.append(f"peer URLs https: {members.count(', https://127.0.0.1:') // 2}")
        # Keep-alives through every member: a follower forwards them to the leader's
        # https client URL, presenting its own certificate.
        granted = etcd_procs.etcdctl(first, *root, "lease", "grant", "60", binary=BINARY)
        lease = granted.stdout.split()[1]
        for endpoint in running.endpoints:
            kept = _run([endpoint], *root, "lease", "keep-alive", "--once", lease)
            lines.append(kept.replace(lease, "ID"))
        return lines


def test_peer_tls_cluster_serves_writes_as_etcd(tmp_path: Path) -> None:
    """Three members over https peer URLs (peer certificates required): writes through one
    member are read on another, and MemberList shows the https peer URLs, on both."""
    certs = trustme_certs(tmp_path)
    ours = _peer_tls_transcript("ours", tmp_path, certs)
    assert ours == _peer_tls_transcript("etcd", tmp_path, certs)
    assert ours[5] == "rc=0 out='0\\n1\\n2\\n3\\n4' err=''"
    assert ours[6] == "peer URLs https: 3"
    assert ours[7:] == ["rc=0 out='lease ID keepalived with TTL(60)' err=''"] * 3


def _http_over_tls(kind: str, tmp_path: Path, certs: ClusterCerts) -> list[str]:
    security = launcher.SecurityPlan(certs, client_cert_auth=True)
    context = ssl.create_default_context(cafile=certs.ca_file)
    root = certs.client("root")
    context.load_cert_chain(root.cert, root.key)
    answers = []
    with etcd_procs.cluster(kind, tmp_path / kind, size=1, security=security) as running:
        base = running.endpoints[0]
        with urllib.request.urlopen(f"{base}/health", context=context, timeout=5) as page:
            answers.append(f"/health {page.status} {page.read().decode()}")
        put = urllib.request.Request(
            f"{base}/v3/kv/put", data=b'{"key":"aA==","value":"dg=="}', method="POST"
        )
        with urllib.request.urlopen(put, context=context, timeout=5) as page:
            answers.append(f"/v3/kv/put {page.status} {sorted(json.loads(page.read()))}")
    return answers


def test_http_gateway_over_tls_matches_etcd(tmp_path: Path) -> None:
    """HTTP/1.1 on the TLS client port (ALPN http/1.1 offered beside h2): /health and the
    JSON gateway answer as etcd's do."""
    certs = trustme_certs(tmp_path)
    ours = _http_over_tls("ours", tmp_path, certs)
    assert ours == _http_over_tls("etcd", tmp_path, certs)
    assert ours == ['/health 200 {"health":"true","reason":""}', "/v3/kv/put 200 ['header']"]
