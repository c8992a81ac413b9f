"""`etcdspec cluster up --tls --auth` and `serve`'s TLS flags, through etcdspec.cli.main.run.

`up --tls --auth` starts three members over https with client certificates required,
enables auth with a generated root password, and prints what a client needs; the
etcdctl command it prints works as printed, the root certificate alone (its CN) is root,
a wrong password, no certificate and plaintext are refused; `status` and `restart` work
over TLS; `down` stops everything. `serve` with an https URL and no certificate, or a
certificate file that is not there, exits 2 naming the flag (etcd's message for the
first).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import stat
from pathlib import Path

import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.tools import launcher
from tests.support import etcd_procs

pytestmark = [
    pytest.mark.skipif(etcd_procs.ETCDCTL_35 is None, reason="needs etcdctl 3.5"),
    pytest.mark.timeout(180),
]


def _etcdctl(argv: list[str]) -> tuple[int, str]:
    assert argv[0] == "etcdctl"
    result = etcd_procs.etcdctl(
        [], "--command-timeout=2s", "--dial-timeout=1s", *argv[1:], binary=etcd_procs.ETCDCTL_35
    )
    errors = [line for line in result.stderr.splitlines() if not line.startswith('{"level"')]
    return result.returncode, (result.stdout + " ".join(errors)).strip()


def test_cluster_up_tls_auth_prints_what_a_client_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "secured"
    args = ["--dir", str(directory)]
    fast = ["--heartbeat-interval", "50", "--election-timeout", "500"]
    assert run(["cluster", "up", "--size", "3", "--tls", "--auth", *fast, "--json", *args]) == 0
    access = json.loads(capsys.readouterr().out)
    try:
        endpoints = access["endpoints"]
        assert all(e.startswith("https://127.0.0.1:") for e in endpoints)
        password_file = directory / "root.password"
        assert password_file.read_text().strip() == access["password"]
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(Path(access["key"]).stat().st_mode) == 0o600
        printed = shlex.split(access["etcdctl"])
        assert _etcdctl(printed) == (0, "OK")
        with_user = [arg for arg in printed if not arg.startswith("--user=")]
        base = [arg for arg in with_user if arg not in ("put", "hello", "world")]
        # The root certificate's CN is root: no password needed (--client-cert-auth).
        assert _etcdctl([*base, "get", "hello", "--print-value-only"]) == (0, "world")
        assert _etcdctl([*base, "auth", "status"])[1].startswith("Authentication Status: true")
        code, text = _etcdctl([*base, "--user=root:wrong", "get", "hello"])
        assert code == 2 and "authentication failed" in text  # etcdctl: bad connection
        no_cert = [a for a in base if not a.startswith(("--cert=", "--key="))]
        code, text = _etcdctl([*no_cert, f"--user=root:{access['password']}", "get", "hello"])
        assert code == 2 and "deadline exceeded" in text  # --user: at connecting
        plain = [f"--endpoints={endpoints[0].replace('https://', 'http://')}"]
        code, text = _etcdctl(["etcdctl", *plain, "get", "hello"])
        assert code == 1 and "deadline exceeded" in text

        capsys.readouterr()
        assert run(["cluster", "status", *args]) == 0
        assert "leader" in capsys.readouterr().out
        assert run(["cluster", "restart", "m2", *args]) == 0
        assert _etcdctl([*base, "get", "hello", "--print-value-only"]) == (0, "world")
        assert run(["cluster", "down", *args]) == 0
    finally:
        with contextlib.suppress(launcher.LauncherError):
            launcher.stop_cluster(directory)


@pytest.mark.parametrize("flag", ["--tls", "--auth"])
def test_cluster_up_prints_the_etcdctl_line_in_text(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--tls alone (the certificate's CN is root, no password) or --auth alone (plain
    http, root's password): the printed etcdctl line works as printed."""
    directory = tmp_path / "one"
    args = ["--dir", str(directory)]
    assert run(["cluster", "up", "--size", "1", flag, *args]) == 0
    try:
        out = capsys.readouterr().out
        if flag == "--tls":
            assert f"CA file: {directory.resolve() / 'tls' / 'ca.pem'}" in out
            assert "client certificate (CN root)" in out and "auth enabled" not in out
        else:
            assert "auth enabled: user root, password" in out and "CA file" not in out
        line = next(line for line in out.splitlines() if line.startswith("try: "))
        printed = shlex.split(line.removeprefix("try: "))
        assert _etcdctl(printed) == (0, "OK")
        if flag == "--auth":  # without the password, auth refuses
            anonymous = [arg for arg in printed if not arg.startswith("--user=")]
            code, text = _etcdctl(anonymous)
            assert code == 1 and "user name is empty" in text, text
    finally:
        with contextlib.suppress(launcher.LauncherError):
            launcher.stop_cluster(directory)


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (
            ["--listen-client-urls", "https://127.0.0.1:1"],
            "TLS key/cert (--cert-file, --key-file) must be provided for client url "
            "https://127.0.0.1:1 with HTTPS scheme",
        ),
        (
            ["--listen-peer-urls", "https://127.0.0.1:2"],
            "TLS key/cert (--peer-cert-file, --peer-key-file) must be provided for peer url",
        ),
        (
            ["--listen-client-urls", "https://127.0.0.1:1", "--cert-file", "/nope/c.pem"],
            "TLS key/cert (--cert-file, --key-file) must be provided",
        ),
        (
            [
                "--listen-client-urls",
                "https://127.0.0.1:1",
                "--cert-file",
                "/nope/c.pem",
                "--key-file",
                "/nope/k.pem",
            ],
            "--cert-file: /nope/c.pem: no such file",
        ),
    ],
)
def test_serve_refuses_bad_tls_flags(
    flags: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["serve", "--data-dir", str(tmp_path / "d"), *flags]) == ExitCode.USAGE
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
