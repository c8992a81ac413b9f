"""The `[tool.etcdspec]` table of a project's pyproject.toml: defaults for `etcdspec verify`.

Contract: `load_tool_config(path)` reads the table from `path` (a missing file or a file
without the table gives the defaults) and checks it: `workers` (an int, at least 1: the
local worker processes the distributed stages use) and `cluster` (a string, the address
of a running Dask scheduler, tcp://HOST:PORT), not both, and `worker_memory` (an int, MB:
each local worker's memory bound; only with `workers`). Anything else is a
`ToolConfigError` naming the file, the key and what to write instead. Options given on
the command line win over the file (`ToolConfig.override`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

KNOWN_KEYS = ("workers", "cluster", "worker_memory")


class ToolConfigError(ValueError):
    """A `[tool.etcdspec]` table that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class ToolConfig:
    workers: int | None = None
    cluster: str | None = None
    worker_memory_mb: int | None = None
    source: str = "defaults"  # where the values came from, for describe()

    def override(
        self, workers: int | None, cluster: str | None, worker_memory_mb: int | None = None
    ) -> ToolConfig:
        """These values, with the command line's where it gave one (a command-line
        --workers drops the file's cluster and the other way round; --cluster drops the
        file's memory bound, which is for local workers)."""
        config = self
        if workers is not None:
            config = replace(config, workers=workers, cluster=None)
        if cluster is not None:
            config = replace(config, workers=None, cluster=cluster, worker_memory_mb=None)
        if worker_memory_mb is not None:
            config = replace(config, worker_memory_mb=worker_memory_mb)
        return config

    def distributed(self) -> bool:
        return self.cluster is not None or (self.workers is not None and self.workers > 1)

    def describe(self) -> str:
        if self.cluster is not None:
            return f"the Dask cluster at {self.cluster} ({self.source})"
        if self.workers is not None and self.workers > 1:
            bound = "" if self.worker_memory_mb is None else f" of {self.worker_memory_mb} MB"
            return f"{self.workers} local workers{bound} ({self.source})"
        return "this process"


def load_tool_config(path: Path) -> ToolConfig:
    """The `[tool.etcdspec]` table of `path` (see the module docstring)."""
    if not path.is_file():
        return ToolConfig()
    try:
        with path.open("rb") as file:
            document = tomllib.load(file)
    except tomllib.TOMLDecodeError as error:
        raise ToolConfigError(f"{path}: not valid TOML: {error}") from error
    table = document.get("tool", {}).get("etcdspec")
    if table is None:
        return ToolConfig()
    where = f"{path} [tool.etcdspec]"
    if not isinstance(table, dict):
        raise ToolConfigError(f"{where}: must be a table, e.g. `workers = 2`")
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise ToolConfigError(
            f"{where}: unknown key {', '.join(unknown)}; known keys: {', '.join(KNOWN_KEYS)}"
        )
    workers = _workers(where, table.get("workers"))
    cluster = _cluster(where, table.get("cluster"))
    if workers is not None and cluster is not None:
        raise ToolConfigError(
            f"{where}: give `workers` (a local cluster) or `cluster` (a running one), not both"
        )
    memory = _worker_memory(where, table.get("worker_memory"))
    if memory is not None and workers is None:
        raise ToolConfigError(
            f"{where}: worker_memory bounds local workers: give `workers` too (e.g. workers = 2)"
        )
    return ToolConfig(workers=workers, cluster=cluster, worker_memory_mb=memory, source=str(path))


def _workers(where: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolConfigError(f"{where}: workers must be an integer of at least 1, got {value!r}")
    return value


def _cluster(where: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or "://" not in value:
        raise ToolConfigError(
            f"{where}: cluster must be a scheduler address like "
            f'"tcp://127.0.0.1:8786", got {value!r}'
        )
    return value


def _worker_memory(where: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolConfigError(
            f"{where}: worker_memory must be a number of MB of at least 1 (e.g. 2048), "
            f"got {value!r}"
        )
    return value
