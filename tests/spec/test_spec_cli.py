"""`etcdspec prove`: exit codes, JSON, ITF, BMC and located errors, run in-process."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from etcdspec.cli.main import run
from etcdspec.spec.loader import SPEC_DIR, SPEC_NAMES


def test_prove_mvcc_and_lease_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["prove", "mvcc", "lease"]) == 0
    out = capsys.readouterr().out
    assert "spec mvcc: holds" in out and "spec lease: holds" in out


def test_mutation_exit_1_with_itf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    itf = tmp_path / "cti.itf.json"
    code = run(["prove", "lease", "--mutation", "attach_revoked", "--fail-fast", "--itf", str(itf)])
    assert code == 1
    assert "counterexample to induction" in capsys.readouterr().out
    trace = json.loads(itf.read_text())
    assert trace["#meta"]["format"] == "ITF"
    assert len(trace["states"]) == 2 and "attached" in trace["vars"]


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["prove", "mvcc", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "etcdspec.prove/1" and document["valid"] is True
    results = document["specs"][0]["results"]
    assert {r["kind"] for r in results} == {"init", "preserve", "enabled", "witness"}


def test_bmc_prints_a_violating_run(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(
        ["prove", "mvcc", "--mutation", "compact_future", "--bmc", "2", "--size", "revision=3"]
    )
    assert code == 1
    out = capsys.readouterr().out
    assert "VIOLATED at depth " in out and "--- compact(" in out


def test_bmc_in_rounds_writes_a_replayed_run_as_itf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    itf = tmp_path / "run.itf.json"
    argv = ["prove", "mvcc", "--mutation", "reuse_revision", "--bmc", "1", "--rounds"]
    assert run([*argv, "--size", "revision=3", "--itf", str(itf)]) == 1
    out = capsys.readouterr().out
    assert "VIOLATED in 1 rounds" in out and "replayed by the finite evaluator" in out
    assert len(json.loads(itf.read_text())["states"]) >= 2


@pytest.mark.parametrize(
    "argv",
    [
        ["prove", "nosuchspec"],
        ["prove", "mvcc", "--mutation", "nosuchbug"],
        ["prove", "mvcc", "--only", "nosuchproperty"],
        ["prove", "mvcc", "--action", "nosuchaction"],
        ["prove", "mvcc", "--bmc", "1", "--size", "node=3"],
        ["prove", "mvcc", "--bmc", "1", "--size", "revision"],
        ["prove", "mvcc", "--jobs", "0"],
        ["prove", "mvcc", "--rounds"],
    ],
)
def test_unknown_names_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("etcdspec: ") and len(err.strip().splitlines()) == 1


def test_jobs_one_and_two_prove_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["prove", "lease", "--json"]
    assert run([*argv, "--jobs", "1"]) == 0
    serial = json.loads(capsys.readouterr().out)
    assert run([*argv, "--jobs", "2"]) == 0
    parallel = json.loads(capsys.readouterr().out)

    def verdicts(document: dict[str, Any]) -> list[tuple[str, str]]:
        return [
            (f"{item['kind']} {item['subject']} {item['action']}", str(item["valid"]))
            for spec in document["specs"]
            for item in spec["results"]
        ]

    assert verdicts(serial) == verdicts(parallel)
    assert verdicts(serial)


def test_timeout_exits_3() -> None:
    assert (
        run(
            [
                "prove",
                "raft",
                "--only",
                "leader_completeness",
                "--action",
                "become_leader",
                "--timeout",
                "0.001",
            ]
        )
        == 3
    )


def test_bad_spec_exits_4_with_every_error_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.spec"
    bad.write_text(
        "sort s\nrelation r(s)\ninvariant i: forall x: s. q(x)\nsafety j: forall x: t. r(x)\n"
    )
    assert run(["prove", str(bad)]) == 4
    err = capsys.readouterr().err
    assert "bad.spec:3:" in err and "E207" in err and "bad.spec:4:" in err and "E203" in err
    assert "^" in err


def test_list_mutations(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["prove", "--list-mutations"]) == 0
    out = capsys.readouterr().out
    for name in ("figure8", "two_votes", "no_truncation", "stale_append"):
        assert f"raft: {name}" in out


def test_every_shipped_spec_is_accepted_by_its_built_in_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shipped = sorted(p.stem for p in SPEC_DIR.glob("*.spec"))
    assert sorted(SPEC_NAMES) == shipped
    assert {"raft_steps", "raft_member"} <= set(SPEC_NAMES)
    assert run(["prove", *SPEC_NAMES, "--list-mutations"]) == 0
    out = capsys.readouterr().out
    assert "raft_steps: vote_not_persisted (in crash)" in out
    assert "raft_member: no_term_commit" in out
    assert run(["prove", "--list-mutations"]) == 0  # the default set includes raft_steps
    assert "raft_steps: second_vote (in grant_vote)" in capsys.readouterr().out


def test_no_hints_proves_the_same_by_full_queries(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["prove", "lease", "--json"]) == 0
    hinted = json.loads(capsys.readouterr().out)["specs"][0]["results"]
    assert run(["prove", "lease", "--json", "--no-hints"]) == 0
    plain = json.loads(capsys.readouterr().out)["specs"][0]["results"]
    assert [(r["subject"], r["action"], r["valid"]) for r in hinted] == [
        (r["subject"], r["action"], r["valid"]) for r in plain
    ]
    assert "hint" in {r.get("route") for r in hinted}
    assert "hint" not in {r.get("route") for r in plain}


def test_write_hints_writes_a_sidecar_that_prove_then_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "lease.spec"
    spec.write_text((Path(__file__).parents[2] / "spec" / "lease.spec").read_text())
    assert run(["prove", str(spec), "--write-hints"]) == 0
    assert f"{tmp_path / 'lease.hints'}:" in capsys.readouterr().out
    assert (tmp_path / "lease.hints").is_file()
    assert run(["prove", str(spec), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["specs"][0]["results"]
    assert "hint" in {r.get("route") for r in results}


def test_prove_reports_once_per_stream(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report on stdout; the per-depth progress (which repeats it) on stderr only
    when stderr is a terminal, and never with --quiet."""
    import sys

    argv = ["prove", "mvcc", "--bmc", "2"]
    assert run(argv) == 0
    out, err = capsys.readouterr()
    assert "bmc mvcc" in out and "depth" not in err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert run(argv) == 0
    out_tty, err_tty = capsys.readouterr()
    assert out_tty.split(" — ")[0] == out.split(" — ")[0] and re.search(
        r"depth \d+: no violation", err_tty
    )
    assert run([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
