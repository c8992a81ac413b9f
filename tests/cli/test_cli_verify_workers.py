"""`etcdspec verify --workers N / --cluster ADDRESS` and the same in `[tool.etcdspec]`: the
model stage's exhaustive search runs on a local Dask cluster with the same verdict and
state count; a bad table is a clear error naming the file, the key and what to write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.tool_config import ToolConfig, ToolConfigError, load_tool_config

pytest.importorskip("distributed", reason="Dask distributed is a dependency: pip install -e .")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("workers = 0", "workers must be an integer of at least 1, got 0"),
        ('workers = "two"', "workers must be an integer of at least 1, got 'two'"),
        ("workers = true", "workers must be an integer of at least 1, got True"),
        ('cluster = "127.0.0.1"', 'cluster must be a scheduler address like "tcp://'),
        ('workers = 2\ncluster = "tcp://127.0.0.1:8786"', "not both"),
        ("worker = 2", "unknown key worker; known keys: workers, cluster, worker_memory"),
        ("worker_memory = 512", "worker_memory bounds local workers: give `workers` too"),
        ("workers = 2\nworker_memory = 0", "worker_memory must be a number of MB of at least 1"),
    ],
)
def test_a_bad_table_names_the_file_the_key_and_the_fix(
    tmp_path: Path, table: str, message: str
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(f"[tool.etcdspec]\n{table}\n")
    with pytest.raises(ToolConfigError, match=r"pyproject\.toml \[tool\.etcdspec\]") as raised:
        load_tool_config(path)
    assert message in str(raised.value)


def test_no_file_or_no_table_gives_the_single_process_defaults(tmp_path: Path) -> None:
    assert load_tool_config(tmp_path / "missing.toml") == ToolConfig()
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n')
    assert not load_tool_config(path).distributed()


def test_the_command_line_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.etcdspec]\ncluster = "tcp://10.0.0.1:8786"\n')
    loaded = load_tool_config(path)
    assert loaded.cluster == "tcp://10.0.0.1:8786" and loaded.distributed()
    assert loaded.override(3, None) == ToolConfig(workers=3, source=str(path))
    assert loaded.override(None, None) == loaded
    bounded = tmp_path / "bounded.toml"
    bounded.write_text("[tool.etcdspec]\nworkers = 2\nworker_memory = 2048\n")
    local = load_tool_config(bounded)
    assert local.worker_memory_mb == 2048
    assert local.describe() == f"2 local workers of 2048 MB ({bounded})"
    assert local.override(None, None, 512).worker_memory_mb == 512
    # a running cluster's workers have their own limits: the file's bound is dropped
    assert local.override(None, "tcp://10.0.0.1:8786").worker_memory_mb is None


def test_bad_values_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["verify", "--workers", "0", "--report", str(tmp_path)]) == ExitCode.USAGE
    assert "--workers must be at least 1" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[tool.etcdspec]\nworkers = -1\n")
    assert run(["verify", "--config", str(bad), "--report", str(tmp_path)]) == ExitCode.BAD_INPUT
    assert f"{bad} [tool.etcdspec]: workers must be" in capsys.readouterr().err
    bound = ["verify", "--worker-memory", "512", "--report", str(tmp_path)]
    assert run([*bound, "--config", str(tmp_path / "none.toml")]) == ExitCode.USAGE
    assert "--worker-memory bounds local workers: add --workers N" in capsys.readouterr().err
    assert run([*bound, "--cluster", "tcp://127.0.0.1:9"]) == ExitCode.USAGE
    assert "dask worker --memory-limit" in capsys.readouterr().err


def _model_stage(folder: Path, *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    report = folder / "report"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "etcdspec", "verify", "--stage", "model", "--quick"),
            *("--report", str(report), *extra),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=folder,
    )
    assert done.returncode == ExitCode.HOLDS, done.stderr
    result = json.loads((report / "result.json").read_text())
    runs = json.loads((report / "model" / "explore.json").read_text())["runs"]
    return result, runs["exhaustive-cluster"]


def test_verify_runs_the_exhaustive_search_on_the_configured_workers(tmp_path: Path) -> None:
    here, configured = tmp_path / "here", tmp_path / "configured"
    here.mkdir()
    configured.mkdir()
    (configured / "pyproject.toml").write_text("[tool.etcdspec]\nworkers = 2\n")
    result_here, search_here = _model_stage(here)
    result_configured, search_configured = _model_stage(configured)
    assert result_here["valid"] is True and result_configured["valid"] is True
    assert search_configured["distinct_states"] == search_here["distinct_states"] > 50
    assert search_configured["depth"] == search_here["depth"]
    assert "a local Dask cluster of 2 workers" in search_configured["note"]
    assert "Dask" not in search_here["note"]
