"""Conformance runs against secured targets (etcdspec.conform.secure).

`--secure`: our 3-member server and etcd 3.5.1, each with TLS on the client ports,
client certificates required, auth enabled; the run's clients log in as root with a
token, a kill makes the restarted member forget its simple tokens (both servers do) and
the clients log in again; the run holds. `--endpoints https://...` with `--cacert`,
`--cert`, `--key` and `--user root:PASSWORD` against a cluster up with `--tls --auth`
holds; a wrong password, an https endpoint without `--cacert`, and `--user` without it
are usage errors said before the run.
"""

from __future__ import annotations

import contextlib
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from side_by_side import Outcome, run_side_by_side

from etcdspec.cli.main import run
from etcdspec.conform.run import ConformOptions, run_conform
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.tools import launcher
from etcdspec.verdict import Verdict
from tests.support import etcd_procs

ETCD_BIN = etcd_procs.ETCD_BIN


def _secured_options(tmp_path: Path, target: str) -> ConformOptions:
    return ConformOptions(
        report_dir=tmp_path / "reports",
        target=target,
        etcd_bin=ETCD_BIN if target == "etcd" else None,
        faults=("kill",),
        duration_s=10.0,
        fault_interval_s=2.0,
        fault_hold_s=1.0,
        seed=5,
        secure=True,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome[Any]]:
    """The secured run on each target, made side by side (each its own cluster, TLS
    files and report folder), keyed by target."""
    targets = ["reference"] + (["etcd"] if ETCD_BIN is not None else [])
    return run_side_by_side(
        {
            target: partial(run_conform, _secured_options(tmp_path_factory.mktemp(target), target))
            for target in targets
        }
    )


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    "target",
    [
        "reference",
        pytest.param(
            "etcd",
            marks=pytest.mark.skipif(ETCD_BIN is None, reason="etcd not installed"),
        ),
    ],
)
def test_secured_local_run_with_kill_holds(runs: dict[str, Outcome[Any]], target: str) -> None:
    result = runs[target].value()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert result.counts["ok"] > 80, result.counts
    assert any(" kill " in line for line in result.faults), result.faults
    assert (result.run_dir / "cluster" / "tls" / "ca.pem").exists()
    assert "with TLS and auth" in (result.run_dir / "result.json").read_text()
    history = (result.run_dir / "history.jsonl").read_text()
    assert "permission denied" not in history and "user name is empty" not in history


def test_endpoints_over_tls_with_a_user_hold_and_bad_credentials_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "secured"
    fast = ["--heartbeat-interval", "50", "--election-timeout", "500"]
    assert (
        run(
            [
                "cluster",
                "up",
                "--size",
                "3",
                "--tls",
                "--auth",
                *fast,
                "--json",
                "--dir",
                str(directory),
            ]
        )
        == 0
    )
    access = json.loads(capsys.readouterr().out)
    try:
        endpoints = ",".join(access["endpoints"])
        tls = ["--cacert", access["cacert"], "--cert", access["cert"], "--key", access["key"]]
        common = [
            "conform",
            "--endpoints",
            endpoints,
            "--faults",
            "compact",
            "--report",
            str(tmp_path / "r"),
        ]
        code = run([*common, "--duration", "4s", *tls, "--user", f"root:{access['password']}"])
        out = capsys.readouterr()
        assert code == 0, out.out + out.err
        assert "over TLS" in out.err and "user root" in out.err

        assert run([*common, "--duration", "2s", *tls, "--user", "root:wrong"]) == ExitCode.USAGE
        assert "cannot log in as root" in capsys.readouterr().err
        assert run([*common, "--duration", "2s"]) == ExitCode.USAGE
        assert "is https: give --cacert" in capsys.readouterr().err
        assert run([*common, "--duration", "2s", "--user", "root:x"]) == ExitCode.USAGE
        assert "need --cacert" in capsys.readouterr().err
    finally:
        with contextlib.suppress(launcher.LauncherError):
            launcher.stop_cluster(directory)
