"""`--bcrypt-cost` as etcd 3.5 takes it: the cost of the bcrypt hashes of passwords added
or changed; a cost outside 4..31 is not refused but replaced by the default 10 with
etcd's warning ("use default bcrypt cost instead of the invalid given cost"), and a value
that is not a number exits 2. The cost is read back from the stored hash ($2b$NN$...)
in the member's database after it stopped, and the password still authenticates.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import grpc
import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.pb import auth_pb2, rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher
from tests.support import etcd_procs

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("given", "used", "warned"), [(5, 5, False), (3, 10, True), (32, 10, True)]
)
def test_bcrypt_cost_hashes_passwords_and_out_of_range_falls_back_as_etcd(
    given: int, used: int, warned: bool, tmp_path: Path
) -> None:
    plan = launcher.plan_cluster(tmp_path, 1, heartbeat_ms=50, election_ms=500)
    member = plan.members[0]
    argv = [*launcher.member_argv(plan, member, launcher.ours_program()), f"--bcrypt-cost={given}"]
    log_path = tmp_path / "m1.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    running = launcher.RunningMember(member, process.pid, argv, str(log_path), process)
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=30)
        with grpc.insecure_channel(member.client_url.removeprefix("http://")) as channel:
            auth = rpc_pb2_grpc.AuthStub(channel)
            auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="u", password="secret"), timeout=10)
            auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="r"), timeout=10)
            auth.UserGrantRole(
                rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"), timeout=10
            )
            auth.AuthEnable(rpc_pb2.AuthEnableRequest(), timeout=10)
            token = auth.Authenticate(
                rpc_pb2.AuthenticateRequest(name="u", password="secret"), timeout=10
            ).token
            assert token
    finally:
        launcher.stop_members([running])
    database = Path(member.data_dir) / "member" / "snap" / "db"
    with sqlite3.connect(database) as db:
        (record,) = db.execute(
            "SELECT record FROM auth WHERE kind = 'user' AND name = ?", (b"u",)
        ).fetchone()
    digest = auth_pb2.User.FromString(record).password
    assert digest.startswith(f"$2b${used:02d}$".encode()), digest
    warning = "use default bcrypt cost instead of the invalid given cost"
    assert (warning in log_path.read_text()) is warned


def test_bcrypt_cost_not_a_number_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["serve", "--bcrypt-cost", "abc"]) == ExitCode.USAGE
    assert "--bcrypt-cost" in capsys.readouterr().err


def _guesses(kind: str, tmp_path: Path) -> list[str]:
    answers = []
    with etcd_procs.cluster(kind, tmp_path / kind, size=1) as running:
        target = running.endpoints[0].removeprefix("http://")
        with grpc.insecure_channel(target) as channel:
            auth = rpc_pb2_grpc.AuthStub(channel)
            auth.UserAdd(rpc_pb2.AuthUserAddRequest(name="root", password="right"), timeout=10)
            auth.UserGrantRole(
                rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root"), timeout=10
            )
            auth.AuthEnable(rpc_pb2.AuthEnableRequest(), timeout=10)
            for attempt in range(GUESSES):
                try:
                    auth.Authenticate(
                        rpc_pb2.AuthenticateRequest(name="root", password=f"guess{attempt}"),
                        timeout=10,
                    )
                    answers.append("accepted")
                except grpc.RpcError as error:
                    answers.append(f"{error.code().name} {error.details()}")
            token = auth.Authenticate(
                rpc_pb2.AuthenticateRequest(name="root", password="right"), timeout=10
            ).token
            answers.append("right password: token" if token else "right password: no token")
    return answers


GUESSES = 20


@pytest.mark.skipif(etcd_procs.ETCD_BIN is None, reason="needs etcd")
def test_authenticate_is_not_rate_limited_as_in_etcd(tmp_path: Path) -> None:
    """etcd 3.5 does not limit wrong passwords (etcd-io/etcd#13096, #14444: its answer is
    CN-based auth for users without a password); the only brake is bcrypt's cost per
    check. We do the same, so histories with wrong passwords judge alike on both."""
    ours = _guesses("ours", tmp_path)
    assert ours == _guesses("etcd", tmp_path)
    failed = "INVALID_ARGUMENT etcdserver: authentication failed, invalid user ID or password"
    assert ours == [failed] * GUESSES + ["right password: token"]
