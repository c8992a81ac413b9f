"""The pytest plugin: options for running etcdspec's conformance suite from another CI.

Registered as the `pytest11` entry point `etcdspec`, so any pytest in an environment with
etcdspec installed knows these options. The suite itself is `etcdspec.conform.suite`:

    pytest --pyargs etcdspec.conform.suite --etcdspec-endpoints=http://127.0.0.1:2379

The options only describe the run; nothing happens unless that module is collected, and
then they are checked before any test runs (a usage error, not a dozen failing tests).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

WORKLOADS = ("etcd-kv", "etcd-kv-writes", "kubernetes", "watch", "leases")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("etcdspec", "etcdspec conformance suite")
    group.addoption(
        "--etcdspec-endpoints",
        default=None,
        help="Comma-separated client URLs of a running etcd v3 cluster (its data is "
        "recorded as the history's start; nobody else may write during the run). Faults "
        "that need process control are skipped.",
    )
    group.addoption(
        "--etcdspec-target",
        default=None,
        choices=("reference", "etcd"),
        help="Start a local 3-member cluster instead: our reference server or real etcd.",
    )
    group.addoption(
        "--etcdspec-etcd-bin", default=None, help="etcd binary for --etcdspec-target etcd."
    )
    group.addoption("--etcdspec-workload", default="etcd-kv", choices=WORKLOADS)
    group.addoption("--etcdspec-duration", type=float, default=20.0, help="Seconds of load.")
    group.addoption("--etcdspec-seed", type=int, default=0)
    group.addoption(
        "--etcdspec-faults",
        default="kill,partition",
        help="Comma-separated faults (local targets only); 'none' for none.",
    )
    group.addoption("--etcdspec-report", default="etcdspec-conformance", help="Report folder.")


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(_from_suite(item) for item in session.items):
        from etcdspec.conform.suite import options_from

        options_from(session.config)  # raises pytest.UsageError on a bad combination


def _from_suite(item: pytest.Item) -> bool:
    """Whether `item` is one of the suite's tests. By file, not by module name: pytest
    names a module it collects by path from the folders it finds, and in an editable
    install the suite's folder (conform/) is not named as its package (etcdspec.conform)."""
    path = getattr(getattr(item, "module", None), "__file__", None)
    return path is not None and Path(path).resolve() == _suite_file()


@functools.cache
def _suite_file() -> Path | None:
    spec = importlib.util.find_spec("etcdspec.conform.suite")
    return Path(spec.origin).resolve() if spec is not None and spec.origin else None
