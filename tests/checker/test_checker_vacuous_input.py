"""Nothing checked is never a pass, and bad input says what to do.

An empty history exits 4 (unless --allow-empty); a history whose every operation the
model drops is unknown; a spec with no invariant is unknown for `prove` and for BMC.
The messages name the file without a line 0, and point to the right --format or
--model when the input reads as another one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from etcdspec.checker.check import CheckOptions, EmptyHistory, check_history, load_history
from etcdspec.checker.history import build_history, parse_history_text
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.models import get_model
from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.verdict import Verdict

DATA = Path(__file__).parent / "data"


def _line(index: int, process: int, kind: str, f: str, value: object, time: int) -> str:
    return json.dumps(
        {"index": index, "process": process, "type": kind, "f": f, "value": value, "time": time}
    )


def _only_failed_puts() -> str:
    put = {"key": "a", "value": "1"}
    return "\n".join(
        [
            _line(0, 0, "invoke", "put", put, 10),
            _line(1, 0, "fail", "put", put, 20),
            _line(2, 1, "invoke", "put", put, 30),
            _line(3, 1, "fail", "put", put, 40),
        ]
    )


def test_an_empty_history_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text("")
    assert run(["check", str(path)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "holds no operation" in err and "--allow-empty" in err
    with pytest.raises(EmptyHistory):
        check_history(load_history(path))


def test_an_empty_history_holds_only_when_allowed(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text("\n\n")
    assert run(["check", str(path), "--allow-empty"]) == ExitCode.HOLDS
    report = check_history(load_history(path), CheckOptions(allow_empty=True))
    assert report.verdict is Verdict.TRUE


@pytest.mark.parametrize("model", ["register", "kv", "etcd"])
def test_no_operations_is_unknown_in_the_library(model: str) -> None:
    result = check_linearizable(get_model(model), [])
    assert result.verdict is Verdict.UNKNOWN
    assert "no operation" in result.reason
    assert check_linearizable(get_model(model), [], allow_empty=True).verdict is Verdict.TRUE


def test_every_operation_dropped_is_unknown_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = parse_history_text(_only_failed_puts(), "failed.jsonl")
    report = check_history(history)
    assert report.verdict is Verdict.UNKNOWN
    assert report.linearizability is not None
    assert "all 2 operation(s) were dropped" in report.linearizability.reason
    path = tmp_path / "failed.jsonl"
    path.write_text(_only_failed_puts())
    assert run(["check", str(path)]) == ExitCode.UNKNOWN
    assert "were dropped" in capsys.readouterr().out
    allowed = check_history(history, CheckOptions(allow_empty=True))
    assert allowed.verdict is Verdict.TRUE


def test_one_checkable_operation_is_enough() -> None:
    put = {"key": "a", "value": "1"}
    text = "\n".join(
        [
            _line(0, 0, "invoke", "put", put, 10),
            _line(1, 0, "fail", "put", put, 20),
            _line(2, 1, "invoke", "put", put, 30),
            _line(
                3,
                1,
                "ok",
                "put",
                {**put, "header": {"revision": 2}},
                40,
            ),
        ]
    )
    events = parse_history_text(text).events
    assert check_history(build_history(events)).verdict is Verdict.TRUE


def test_a_missing_file_is_named_without_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("nothing.jsonl", "nothing.edn"):
        assert run(["check", str(tmp_path / name)]) == ExitCode.BAD_INPUT
        err = capsys.readouterr().err
        assert f"{name}: " in err and f"{name}:0" not in err
        assert "no such file" in err.lower()


def test_edn_in_a_jsonl_file_suggests_format_edn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text((DATA / "register_cas_ok.edn").read_text())
    assert run(["check", str(path), "--model", "register"]) == ExitCode.BAD_INPUT
    assert "pass --format edn" in capsys.readouterr().err


def test_json_lines_in_an_edn_file_suggests_format_jsonl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "history.edn"
    path.write_text((DATA / "etcd_ok.jsonl").read_text())
    assert run(["check", str(path)]) == ExitCode.BAD_INPUT
    assert "pass --format jsonl" in capsys.readouterr().err


def test_a_history_of_another_model_suggests_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["check", str(DATA / "kv_lost_append.jsonl")]) == ExitCode.BAD_INPUT
    assert "pass --model kv" in capsys.readouterr().err
    register = tmp_path / "register.edn"
    register.write_text((DATA / "register_cas_ok.edn").read_text())
    assert run(["check", str(register), "--model", "kv"]) == ExitCode.BAD_INPUT
    assert "pass --model register" in capsys.readouterr().err


def test_an_etcd_history_checked_as_a_register_suggests_etcd(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["check", str(DATA / "etcd_ok.jsonl"), "--model", "register"]) == 4
    assert "pass --model etcd" in capsys.readouterr().err


def test_a_history_no_model_reads_names_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(
        "\n".join([_line(0, 0, "invoke", "frob", 1, 10), _line(1, 0, "ok", "frob", 1, 20)])
    )
    assert run(["check", str(path)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "not 'frob'" in err and "pass --model" not in err


NO_INVARIANT = """\
sort node
relation up(node)
init none: forall n: node. !up(n)
action start(n: node) {
  up(n) := true;
}
"""


@pytest.mark.parametrize("text", ["", NO_INVARIANT], ids=["empty", "no-invariant"])
@pytest.mark.parametrize("bmc", [False, True], ids=["prove", "bmc"])
def test_a_spec_with_no_invariant_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, bmc: bool
) -> None:
    path = tmp_path / "vacuous.spec"
    path.write_text(text)
    args = ["prove", str(path), *(["--bmc", "2"] if bmc else []), "--json"]
    assert run(args) == ExitCode.UNKNOWN
    document = json.loads(capsys.readouterr().out)
    assert document["valid"] == "unknown"
    entry = document["bmc" if bmc else "specs"][0]
    assert "no invariant" in entry["note"]
