"""Shared pytest setup: the Hypothesis profile (`ci` under CI, else `dev`), and the
`--rewrite-golden` switch of the golden-transcript runner (tests/support/golden.py)."""

import pytest

from etcdspec.profiles import load_default

load_default()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rewrite-golden",
        action="store_true",
        help="rewrite golden transcripts from the actual output (each rewritten file fails "
        "its test, with the diff to review)",
    )


@pytest.fixture
def rewrite_golden(request: pytest.FixtureRequest) -> bool:
    """True under --rewrite-golden: give it to golden.run_golden as `rewrite`."""
    return bool(request.config.getoption("--rewrite-golden"))
