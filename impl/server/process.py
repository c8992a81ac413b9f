"""The member as a process: `etcdspec serve` runs one until SIGTERM or SIGINT.

`run_member(config)` logs JSON lines on stderr (`JsonLogFormatter`: level, ts, logger,
msg and any `extra` fields), reads the failpoints (ETCDSPEC_FAILPOINTS) and the event
loop choice (ETCDSPEC_EVENT_LOOP, server.event_loop) once, serves, and returns the exit
code: 0 after a clean stop, 2 when the member cannot start (the message says why), 255
when it stopped on an internal error.

Profiling (performance work): with ETCDSPEC_PROFILE=PREFIX in its environment,
`run_member` runs cProfile over the loop thread and writes PREFIX.<name> on stopping.

Garbage collection (`tune_gc`, once the member serves): what start-up allocated is
frozen out of the collector, and the youngest generation is collected every
GC_THRESHOLDS[0] allocations instead of 700, so that collections (pauses of the loop
thread, the tail of the latency) are rare; the work is cyclic garbage only, which the
put path hardly makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from etcdspec.exitcodes import ExitCode
from etcdspec.impl import failpoints
from etcdspec.impl.server import event_loop, join
from etcdspec.impl.server.config import MemberConfig
from etcdspec.impl.server.member import Member, MemberStartError

log = logging.getLogger("etcdspec.impl.server.process")

# Collector thresholds of a serving member (see `tune_gc`); Python's default is (700, 10, 10).
GC_THRESHOLDS = (50_000, 20, 20)
# Profiling (performance work only): cProfile the event-loop thread; the stats go to
# "<value>.<member name>" when the member stops (SIGTERM).
PROFILE_ENV = "ETCDSPEC_PROFILE"


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: level, ts, logger, msg, and any `extra` fields."""

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)))

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "level": record.levelname.lower(),
            "ts": round(record.created, 6),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._STANDARD and key not in ("message", "asctime"):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger("etcdspec")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


async def serve_member(
    config: MemberConfig, ready: Callable[[Member], None] | None = None
) -> str | None:
    """Run one member until SIGTERM/SIGINT (or until it stops itself); its failure, if any.
    A member joining an existing cluster first learns who it is (server.join)."""
    try:
        config = await join.prepare(config)
    except join.JoinError as error:
        raise MemberStartError(f"{config.name}: cannot join the cluster: {error}") from error
    member = Member(config)
    await member.start()
    if ready is not None:
        ready(member)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(member.stop()))
    log.info("member ready", extra={"pid": os.getpid(), "member_id": f"{member.member_id:x}"})
    await member.stopped.wait()
    return member.failure


def tune_gc() -> None:
    """Collect once, freeze what survives (start-up's modules, protobuf classes, the
    recovered state: never garbage) and raise the thresholds (GC_THRESHOLDS). For a
    serving process only: it changes the interpreter's collector for good."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run_member(config: MemberConfig) -> int:
    """The `etcdspec serve` entry point: JSON logs on stderr, serve, exit code."""
    configure_logging()
    try:
        failpoints.activate_from_environment()
        loop_name = event_loop.chosen_loop()
    except (failpoints.FailpointError, event_loop.EventLoopChoiceError) as error:
        log.error("cannot serve", extra={"error": str(error)})
        print(f"etcdspec: {config.name}: cannot start: {error}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if failpoints.active_names():
        log.warning("failpoints active", extra={"failpoints": failpoints.describe()})
    else:
        log.info("failpoints active", extra={"failpoints": failpoints.describe()})
    log.info("event loop", extra={"event_loop": loop_name})
    profile_path = os.environ.get(PROFILE_ENV)
    profiler = cProfile.Profile() if profile_path else None
    try:
        if profiler is not None:
            profiler.enable()
        failure = event_loop.run(serve_member(config, ready=lambda _member: tune_gc()))
    except MemberStartError as error:
        log.error("cannot serve", extra={"error": str(error)})
        print(f"etcdspec: {error}", file=sys.stderr)
        return int(ExitCode.USAGE)
    finally:
        if profiler is not None and profile_path:
            profiler.disable()
            profiler.dump_stats(f"{profile_path}.{config.name}")
    if failure is not None:
        print(f"etcdspec: member stopped on an internal error: {failure}", file=sys.stderr)
        return int(ExitCode.INTERNAL_ERROR)
    return int(ExitCode.HOLDS)
