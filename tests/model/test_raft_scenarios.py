"""Golden Raft scenarios: a script of cluster commands and the exact transcript expected.

Each file in tests/model/raft_scripts/ pins one Raft property (its name) on the model's
cluster, with timeouts as explicit actions so nothing depends on timing. The files are
golden transcripts (tests/support/golden.py) of etcdspec.model.raft_script's commands, run
by its ScriptSession; a `config:` line sets ClusterConfig fields (`prevote=false
persist=explicit`) over this kind's defaults, `timeouts=free persist=sync`. Run with
--rewrite-golden to rewrite them. After its script, every scenario's final cluster must
still keep every invariant.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from golden import run_golden

from etcdspec.model.cluster_config import ClusterConfig
from etcdspec.model.raft_script import ScriptSession

SCRIPTS = sorted((Path(__file__).parent / "raft_scripts").glob("*.txt"))

DEFAULTS = {"timeouts": "free", "persist": "sync"}


def _value(name: str, kind: str, text: str) -> object:
    if kind == "bool" and text in ("true", "false"):
        return text == "true"
    if kind in ("int", "int | None") and text.lstrip("-").isdigit():
        return int(text)
    if kind == "int | None" and text == "none":
        return None
    if kind == "str":
        return text
    raise ValueError(f"config {name}={text}: expected a {kind} (true/false, a number, none)")


def cluster_config(settings: dict[str, str]) -> ClusterConfig:
    """ClusterConfig from a script's `config:` settings, over DEFAULTS."""
    kinds = {field.name: str(field.type) for field in dataclasses.fields(ClusterConfig)}
    options: dict[str, object] = {}
    for name, text in {**DEFAULTS, **settings}.items():
        if name not in kinds:
            fields = ", ".join(kinds)
            raise ValueError(f"config {name}: not a ClusterConfig field; use one of {fields}")
        options[name] = _value(name, kinds[name], text)
    return ClusterConfig(**options)


def start(**settings: str) -> ScriptSession:
    """The golden runner's interpreter for the model's cluster, from a `config:` line."""
    return ScriptSession(cluster_config(settings))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_raft_scenario(script: Path, rewrite_golden: bool) -> None:
    interpreter = run_golden(script, start, rewrite=rewrite_golden)
    interpreter.cluster.check_invariants()


def test_raft_scenarios_exist() -> None:
    assert len(SCRIPTS) >= 9


def test_config_line_sets_cluster_fields_over_the_defaults() -> None:
    config = cluster_config({"prevote": "false", "persist": "explicit", "max_term": "3"})
    assert (config.prevote, config.persist, config.timeouts, config.max_term) == (
        False,
        "explicit",
        "free",
        3,
    )
    with pytest.raises(ValueError, match="not a ClusterConfig field"):
        cluster_config({"pre_vote": "false"})
    with pytest.raises(ValueError, match="expected a bool"):
        cluster_config({"prevote": "no"})
