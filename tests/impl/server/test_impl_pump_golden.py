"""Golden transcripts of the Ready pump's plans (impl/server/pump.py): for the Readies a
member meets (a follower's append, a leader's new entries, an election, a received
snapshot, a commit index alone), the steps each variation of the plan takes, readable as
a table of what happens in which order. Transcripts in tests/impl/server/pump_scripts/,
run by tests/support/golden.py (--rewrite-golden rewrites them; review the diff).

Commands:
    settings plain | default | NAME=on|off ...   the PumpSettings the next plans use
                                                 (plain: every variation off; default:
                                                 every speed-up on)
    plan FACT ...                                the plan for a Ready with these facts
                                                 (ReadyFacts' field names), one line
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest
from golden import run_golden

from etcdspec.impl.server.pump import PLAIN, PumpSettings, ReadyFacts, describe_plan, plan

SCRIPTS = sorted((Path(__file__).parent / "pump_scripts").glob("*.txt"))
FACTS = {f.name for f in fields(ReadyFacts)}
SETTINGS = {f.name for f in fields(PumpSettings)}


class PumpInterpreter:
    """The golden runner's interpreter for plans: the settings so far, and `plan`."""

    def __init__(self) -> None:
        self.settings = PumpSettings()

    def run(self, command: str) -> list[str]:
        verb, *args = command.split()
        if verb == "settings":
            return [self._settings(args).describe()]
        if verb == "plan":
            unknown = sorted(set(args) - FACTS)
            if unknown:
                raise ValueError(f"unknown facts {unknown}; the facts are {sorted(FACTS)}")
            facts = ReadyFacts(**{name: True for name in args})
            return [describe_plan(plan(facts, self.settings))]
        raise ValueError(f"unknown command {verb!r}: settings or plan")

    def _settings(self, args: list[str]) -> PumpSettings:
        if args == ["plain"]:
            self.settings = PLAIN
        elif args == ["default"]:
            self.settings = PumpSettings()
        else:
            changes: dict[str, bool] = {}
            for arg in args:
                name, _, value = arg.partition("=")
                if name not in SETTINGS or value not in ("on", "off"):
                    raise ValueError(f"expected NAME=on|off with NAME in {sorted(SETTINGS)}")
                changes[name] = value == "on"
            self.settings = replace(self.settings, **changes)
        return self.settings


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_pump_plans(script: Path, rewrite_golden: bool) -> None:
    run_golden(script, PumpInterpreter, rewrite=rewrite_golden)


def test_pump_scripts_exist() -> None:
    assert len(SCRIPTS) >= 4
