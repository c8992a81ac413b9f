"""Shared pytest setup: the Hypothesis profile (`ci` under CI, else `dev`), the
`--rewrite-golden` switch of the golden-transcript runner (tests/support/golden.py), and
the session's one headless Chromium for page tests (tests/support/browser.py)."""

from collections.abc import Iterator

import pytest
from browser import Browser

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


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for every page test of the session (a tab per page)."""
    started = Browser.start(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield started
    finally:
        started.close()
