"""The `cluster`, `serve` and `snapshot` verbs, run in-process through etcdspec.cli.main.run.

`cluster up` starts separate member processes and records them; `status` reports every
member with a leader (and a stopped one as stopped); `stop`/`start`/`restart` one member;
`add [--learner]`/`promote`/`remove` one; `snapshot save/status` work against it; `down` stops exactly the
recorded processes (their pids are gone afterwards). Bad flags exit 2 with a message
naming the flag.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.server.metrics import parse_prometheus
from etcdspec.impl.tools import launcher


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"


def test_cluster_up_status_snapshot_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "c"
    args = ["--dir", str(directory)]
    try:
        assert (
            run(
                [
                    "cluster",
                    "up",
                    "--size",
                    "3",
                    "--heartbeat-interval",
                    "50",
                    "--election-timeout",
                    "500",
                    "--trace",
                    "--json",
                    *args,
                ]
            )
            == 0
        )
        endpoints = json.loads(capsys.readouterr().out)["endpoints"]
        assert len(endpoints) == 3
        assert run(["cluster", "up", *args]) == ExitCode.USAGE  # already recorded
        assert run(["cluster", "status", "--json", *args]) == 0
        rows = json.loads(capsys.readouterr().out)
        leaders = {row["leader"] for row in rows}
        assert len(rows) == 3 and len(leaders) == 1 and 0 not in leaders
        _, members = launcher.read_state(directory)
        with urllib.request.urlopen(f"{members[0].plan.metrics_url}/metrics", timeout=5) as page:
            samples = parse_prometheus(page.read().decode())
        assert samples["etcd_server_has_leader"] == 1
        assert samples["etcd_server_proposals_applied_total"] >= 1
        assert samples["etcd_mvcc_db_total_size_in_bytes"] > 0
        snap = tmp_path / "s.db"
        assert run(["snapshot", "save", str(snap), "--endpoints", endpoints[0]]) == 0
        assert run(["snapshot", "status", str(snap), "--json"]) == 0
        status = json.loads(capsys.readouterr().out.splitlines()[-1])
        # etcdutl's revision is the last key revision in the file: none in an empty store.
        assert status["revision"] == 0 and status["totalKey"] > 0
    finally:
        _, members = launcher.read_state(directory)
        pids = [member.pid for member in members]
        assert run(["cluster", "down", *args]) == 0
    assert not any(_pid_alive(pid) for pid in pids)
    traces = sorted(directory.glob("*.trace.ndjson"))
    assert len(traces) == 3 and all(path.read_text().startswith('{"v":1') for path in traces)
    assert run(["cluster", "status", *args]) == ExitCode.BAD_INPUT


def _revision_on(endpoint: str, revision: int, timeout_s: float = 30.0) -> bool:
    """Whether `endpoint` reports `revision` (or later) before the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(launcher.LauncherError):
            if launcher.probe_status(endpoint)["revision"] >= revision:
                return True
        time.sleep(0.1)
    return False


def _leader_other_than(member_id: int, endpoints: list[str], timeout_s: float = 30.0) -> bool:
    """Whether every endpoint names one leader, not `member_id`, before the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(launcher.LauncherError):
            leaders = {launcher.probe_status(endpoint)["leader"] for endpoint in endpoints}
            if len(leaders) == 1 and leaders.isdisjoint({0, member_id}):
                return True
        time.sleep(0.1)
    return False


def test_cluster_stop_start_restart_one_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One member stopped (or killed), reported stopped with no pid, started again on its
    data: it catches up with what was written while it was down."""
    directory = tmp_path / "c"
    args = ["--dir", str(directory)]
    fast = ["--heartbeat-interval", "50", "--election-timeout", "500"]
    assert run(["cluster", "up", "--size", "3", *fast, "--json", *args]) == 0
    endpoints = json.loads(capsys.readouterr().out)["endpoints"]
    try:
        killed_id = launcher.probe_status(endpoints[1])["member_id"]
        assert run(["cluster", "stop", "m2", "--kill", *args]) == 0
        _, members = launcher.read_state(directory)
        killed = launcher.find_member(members, "m2")
        assert not _pid_alive(killed.pid)
        capsys.readouterr()
        assert run(["cluster", "status", "--json", *args]) == ExitCode.UNREACHABLE
        rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
        assert rows["m2"]["alive"] is False and rows["m2"]["pid"] is None
        assert "stopped" in rows["m2"]["error"] and rows["m1"]["alive"] is True
        assert run(["cluster", "status", *args]) == ExitCode.UNREACHABLE
        assert f"m2 {endpoints[1]}: stopped (was pid {killed.pid})" in capsys.readouterr().out
        assert run(["cluster", "stop", "m2", *args]) == ExitCode.BAD_INPUT
        assert "m2 is not running" in capsys.readouterr().err

        # m2 may have led: the others go on naming it until one of them times out, and
        # a write forwarded to it is lost (etcd's too: "request timed out").
        assert _leader_other_than(killed_id, [endpoints[0], endpoints[2]])
        with grpc.insecure_channel(endpoints[0].removeprefix("http://")) as channel:
            put = rpc_pb2_grpc.KVStub(channel).Put(
                rpc_pb2.PutRequest(key=b"while-down", value=b"1"), timeout=10
            )
        assert run(["cluster", "start", "m2", *args]) == 0
        assert "m2 pid" in capsys.readouterr().out
        _, members = launcher.read_state(directory)
        started = launcher.find_member(members, "m2")
        assert started.pid != killed.pid and started.alive()
        assert _revision_on(endpoints[1], put.header.revision)
        assert run(["cluster", "start", "m2", *args]) == ExitCode.BAD_INPUT
        assert "stop it first" in capsys.readouterr().err

        assert run(["cluster", "stop", "m3", *args]) == 0
        assert run(["cluster", "restart", "m3", *args]) == 0  # a stopped one: just start
        _, members = launcher.read_state(directory)
        assert all(member.alive() for member in members)
        assert run(["cluster", "status", *args]) == 0
        assert run(["cluster", "restart", "m9", *args]) == ExitCode.BAD_INPUT
        assert "its members are m1, m2, m3" in capsys.readouterr().err

        _, members = launcher.read_state(directory)
        pids = [member.pid for member in members]
        assert run(["cluster", "stop", "m1", *args]) == 0
        capsys.readouterr()
        assert run(["cluster", "down", *args]) == 0
        out = capsys.readouterr().out
        assert "m1 was not running" in out and "stopped m2" in out and "stopped m3" in out
        assert not any(_pid_alive(pid) for pid in pids)
    finally:
        with contextlib.suppress(launcher.LauncherError):
            launcher.stop_cluster(directory)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["serve", "--listen-client-urls", "http://10.1.2.3:2379"], "loopback"),
        (["serve", "--initial-cluster", "other=http://127.0.0.1:1"], "does not name"),
        (
            ["serve", "--heartbeat-interval", "100", "--election-timeout", "200"],
            "--election-timeout",
        ),
    ],
)
def test_serve_rejects_bad_flags(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(argv) == ExitCode.USAGE
    assert fragment in capsys.readouterr().err


def test_snapshot_of_unreachable_endpoint_exits_5(tmp_path: Path) -> None:
    port = launcher.free_port()
    code = run(
        [
            "snapshot",
            "save",
            str(tmp_path / "x.db"),
            "--endpoints",
            f"http://127.0.0.1:{port}",
            "--timeout",
            "2",
        ]
    )
    assert code == ExitCode.UNREACHABLE
    assert not (tmp_path / "x.db").exists()


def test_serve_on_a_busy_port_exits_2_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = run(
            [
                "serve",
                "--data-dir",
                str(tmp_path / "d"),
                "--listen-client-urls",
                f"http://127.0.0.1:{port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{launcher.free_port()}",
            ]
        )
    assert code == ExitCode.USAGE
    assert "cannot listen for clients" in capsys.readouterr().err


def test_snapshot_restored_into_three_members_starts_a_cluster_with_the_data(
    tmp_path: Path,
) -> None:
    import etcd_procs
    import grpc

    from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

    saved = tmp_path / "backup.db"
    with etcd_procs.cluster("ours", tmp_path / "a", 3) as source:
        with grpc.insecure_channel(source.endpoints[1].removeprefix("http://")) as channel:
            kv = rpc_pb2_grpc.KVStub(channel)
            for index in range(20):
                kv.Put(rpc_pb2.PutRequest(key=f"r{index}".encode(), value=b"v"), timeout=5)
        # A linearizable read there first: the member saved from has applied every put
        # (a follower learns the last commits a little later than the one answering).
        with grpc.insecure_channel(source.endpoints[0].removeprefix("http://")) as channel:
            kv = rpc_pb2_grpc.KVStub(channel)
            assert kv.Range(rpc_pb2.RangeRequest(key=b"r", range_end=b"s"), timeout=5).count == 20
        assert run(["snapshot", "save", str(saved), "--endpoints", source.endpoints[0]]) == 0
    plan = launcher.plan_cluster(tmp_path / "b", 3, heartbeat_ms=50, election_ms=500)
    for member in plan.members:
        assert run(["snapshot", "restore", str(saved), "--data-dir", member.data_dir]) == 0
    members = launcher.start_cluster(plan)
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=30)
        for endpoint in plan.endpoints:
            with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
                kv = rpc_pb2_grpc.KVStub(channel)
                got = kv.Range(rpc_pb2.RangeRequest(key=b"r", range_end=b"s"), timeout=5)
                assert got.count == 20 and got.header.revision == 21
        with grpc.insecure_channel(plan.endpoints[2].removeprefix("http://")) as channel:
            put = rpc_pb2_grpc.KVStub(channel).Put(
                rpc_pb2.PutRequest(key=b"after", value=b"restore"), timeout=5
            )
        assert put.header.revision == 22
    finally:
        launcher.stop_members(members)


def test_cluster_add_learner_promote_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cluster add --learner` starts a fourth member that catches up (status names it a
    learner), `promote` makes it a voter, `remove` takes a member out (its process
    exits, the state file drops it), and an unknown member is refused naming the others."""
    directory = tmp_path / "c"
    args = ["--dir", str(directory)]
    fast = ["--heartbeat-interval", "50", "--election-timeout", "500"]
    assert run(["cluster", "up", "--size", "3", *fast, "--json", *args]) == 0
    endpoints = json.loads(capsys.readouterr().out)["endpoints"]
    try:
        with grpc.insecure_channel(endpoints[0].removeprefix("http://")) as channel:
            rpc_pb2_grpc.KVStub(channel).Put(rpc_pb2.PutRequest(key=b"k", value=b"v"), timeout=5)
        time.sleep(5.5)  # etcd's strict reconfiguration check: voters connected 5 s
        assert run(["cluster", "add", "--learner", *args]) == 0
        assert "added learner m4 pid" in capsys.readouterr().out
        assert run(["cluster", "status", *args]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split()[0] for line in lines if line.endswith(" learner")] == ["m4"]
        assert run(["cluster", "promote", "m4", *args]) == 0
        assert capsys.readouterr().out == "promoted m4\n"
        assert run(["cluster", "status", "--json", *args]) == 0
        rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
        assert sorted(rows) == ["m1", "m2", "m3", "m4"]
        assert not any(row["is_learner"] for row in rows.values())

        _, members = launcher.read_state(directory)
        removed = launcher.find_member(members, "m2")
        time.sleep(5.5)  # m4 connected long enough for the strict check
        assert run(["cluster", "remove", "m2", *args]) == 0
        assert not _pid_alive(removed.pid)
        _, members = launcher.read_state(directory)
        assert [member.plan.name for member in members] == ["m1", "m3", "m4"]
        assert run(["cluster", "status", *args]) == 0
        assert run(["cluster", "remove", "m9", *args]) == ExitCode.BAD_INPUT
        assert "its members are m1, m3, m4" in capsys.readouterr().err
    finally:
        with contextlib.suppress(launcher.LauncherError):
            launcher.stop_cluster(directory)
