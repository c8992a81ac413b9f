"""Shared pytest setup: the Hypothesis profile (`ci` under CI, else `dev`)."""

from etcdspec.profiles import load_default

load_default()
