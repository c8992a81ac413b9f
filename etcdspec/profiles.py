"""Hypothesis settings profiles: `ci` (derandomized, bounded), `dev`, `deep`.

`load_default()` picks `ci` when the CI environment variable is set, else the profile
named by ETCDSPEC_HYPOTHESIS_PROFILE, else `dev`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=_SLOW_OK,
    print_blob=True,
    database=None,
)
settings.register_profile(
    "dev", max_examples=100, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)
settings.register_profile(
    "deep", max_examples=5000, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)


def load_default() -> str:
    name = "ci" if os.environ.get("CI") else os.environ.get("ETCDSPEC_HYPOTHESIS_PROFILE", "dev")
    settings.load_profile(name)
    return name
