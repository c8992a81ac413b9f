"""A seeded exploration replays in any process, whatever else that process imported.

Hypothesis draws constants from the source of the local modules imported so far; the
same seed used to give a different schedule in a process that had also imported the
checker, the spec and the server (1,651 steps to a violation there, 2,844 steps and no
violation in a process that had not). `replayable_draws` around every run prevents it.
Each run here is a separate process, as a replay from the command line would be."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from etcdspec.model.hypothesis_replay import REPLAY_PATCHED

RUN = """
import json, sys
for name in sys.argv[1:]:
    __import__(name)
from etcdspec.model.bugs import BugSet
from etcdspec.model.explore import ExploreOptions, run_hypothesis
from etcdspec.model.refinement import run_exploration
options = ExploreOptions(
    nodes=3, seed=1, max_examples=40, steps=50, persist="explicit",
    bugs=BugSet.of("commit_without_quorum"),
)
plain = run_exploration(options, checked=False)
result = run_hypothesis(options)
print(json.dumps([plain.steps, str(plain.violation), result.steps, result.rule_steps,
                  sorted(result.witnesses.items()), result.labels()]))
"""

OTHER_PARTS = ("etcdspec.checker.check", "etcdspec.spec.prove", "etcdspec.impl.api.serve")


def _run_in_new_process(*imports: str) -> object:
    done = subprocess.run(
        [sys.executable, "-c", RUN, *imports],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_hypothesis_still_has_the_constant_pool_we_empty() -> None:
    # If Hypothesis drops or renames its local-constant pool, replay needs a new look.
    assert REPLAY_PATCHED


@pytest.mark.timeout(600)
def test_same_seed_same_run_whatever_the_process_imported() -> None:
    alone = _run_in_new_process()
    with_everything = _run_in_new_process(*OTHER_PARTS)
    assert alone == with_everything
