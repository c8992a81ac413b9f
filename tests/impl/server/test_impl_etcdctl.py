"""etcdctl against a 3-member cluster of ours and against real etcd: same script, same
transcript once ids, ports, sizes, terms and raft indexes are masked.

The script exercises what DESIGN.md promises etcdctl can do with our server: put, get
(--prefix, --rev, -w json), del, txn -i, watch, lease grant / keep-alive --once /
revoke, compaction, defrag, endpoint status, member list, snapshot save, alarm list,
lock (running a command while holding the lock) and elect (campaign, observe with -l,
a second campaigner elected when the first is interrupted and resigns), and etcd's
errors (empty key, future and compacted revisions, unknown lease, missing lock and
election arguments). Both etcdctl 3.5 (venv) and 3.4 (Debian) run it when present.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import etcd_procs
import pytest

# (etcdctl arguments, stdin): `{lease}` is replaced by the last lease id granted,
# `{snap}` by a file path in the test's directory.
SCRIPT: list[tuple[tuple[str, ...], str | None]] = [
    (("put", "foo", "bar"), None),
    (("put", "foo2", "bar2"), None),
    (("put", "zoo", "z"), None),
    (("get", "foo"), None),
    (("get", "foo", "--prefix"), None),
    (("get", "foo", "--prefix", "--keys-only"), None),
    (("get", "foo", "--prefix", "--count-only", "-w", "fields"), None),
    (("get", "foo", "-w", "json"), None),
    (("get", "foo", "--rev=2"), None),
    (("get", "a", "zz", "--limit=2"), None),
    (("get", "zz", "a"), None),
    (("put", "foo", "baz", "--prev-kv"), None),
    (("del", "foo2"), None),
    (("del", "nothing"), None),
    (("del", "a", "--from-key", "--prev-kv"), None),
    (("put", "a", "1"), None),
    (("txn", "-i"), 'value("a") = "1"\n\nput b 2\nget a\n\nput b 3\n\n'),
    (("get", "b", "-w", "json"), None),
    (("txn", "-i"), 'mod("a") > "100"\n\nput b 4\n\ndel a\n\n'),
    (("get", "", "--prefix"), None),
    (("put", "", "v"), None),
    (("get", "b", "--rev=99"), None),
    (("get", "a", "--from-key", "--sort-by=MODIFY", "--order=DESCEND"), None),
    (("lease", "grant", "100"), None),
    (("put", "leased", "x", "--lease={lease}"), None),
    (("get", "leased", "-w", "json"), None),
    (("lease", "list"), None),
    (("lease", "timetolive", "{lease}", "--keys"), None),
    (("lease", "keep-alive", "--once", "{lease}"), None),
    (("lease", "revoke", "{lease}"), None),
    (("get", "leased"), None),
    (("put", "k", "v", "--lease=1234"), None),
    (("lease", "timetolive", "1234"), None),
    (("lease", "timetolive", "1234", "-w", "json"), None),
    (("lease", "keep-alive", "--once", "1234"), None),
    (("lease", "revoke", "1234"), None),
    (("compaction", "5", "--physical"), None),
    (("compaction", "5"), None),
    (("get", "foo", "--rev=3"), None),
    (("defrag",), None),
    (("endpoint", "status"), None),
    (("endpoint", "status", "-w", "json"), None),
    (("member", "list"), None),
    (("member", "list", "-w", "json"), None),
    (("alarm", "list"), None),
    (("alarm", "disarm"), None),
    (("endpoint", "health"), None),
    (("snapshot", "save", "{snap}"), None),
    (("put", "p/1", "x"), None),
    (("put", "p/2", "y"), None),
    (("del", "p/", "--prefix"), None),
    (("lock", "L", "echo", "held"), None),
    (("lock", "L", "--ttl=5", "--", "sh", "-c", "echo $ETCD_LOCK_KEY"), None),
    (("get", "L", "--prefix", "--keys-only"), None),
    (("lock",), None),
    (("elect", "e"), None),
    (("elect", "-l"), None),
]

_MASKS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"http://127\.0\.0\.1:\d+"), "URL"),
    # Ids and leases as hex; etcd's ids are random, so some have only 12 or 13 digits
    # (a lock key L/<lease> of 13 digits once went unmasked). Decimal runs of 10 or more
    # digits are masked below anyway.
    (
        re.compile(
            r'"(cluster_id|member_id|leader|ID|raft_term|raftTerm|raftIndex|raftAppliedIndex|dbSize|dbSizeInUse)":\d+'
        ),
        r'"\1":N',
    ),
    # after the decimal fields: an id whose decimal has 12-16 digits (an id under 10**16)
    # also reads as hex, and was masked "ID" on one side where the other's gave "N".
    (re.compile(r"\b[0-9a-f]{12,16}\b"), "ID"),
    (re.compile(r"\b\d{10,}\b"), "ID"),
    (re.compile(r'"lease":\d+'), '"lease":ID'),
    (re.compile(r"lease [0-9a-f]+ (granted|keepalived|revoked)"), r"lease ID \1"),
    (re.compile(r'"(ID|MemberID|Lease)" : \d+'), r'"\1" : ID'),
    (re.compile(r'"(RaftTerm|Revision)" : \d+'), r'"\1" : N'),
    (re.compile(r'"version":"[^"]*"'), '"version":V'),
    (re.compile(r"\d+(\.\d+)? [kM]?B"), "SIZE"),
    (re.compile(r"\n?\{\"level\".*"), ""),
    (re.compile(r"took = [0-9.]+[µm]?s"), "took = T"),
    (re.compile(r"remaining\(\d+s\)"), "remaining(Ts)"),
]
# endpoint status table: id, version, size, leader?, learner?, term, index, applied
_STATUS_ROW = re.compile(r"^URL, ID, [^,]+, SIZE, (true|false), false, \d+, \d+, \d+, ?$")


def mask(text: str) -> str:
    text = _sort_members(text)
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    lines = []
    for line in text.splitlines():
        if _STATUS_ROW.match(line):
            line = (
                f"URL, ID, V, SIZE, {_STATUS_ROW.match(line).group(1)}, false, TERM, INDEX, APPLIED"  # type: ignore[union-attr]
            )
        lines.append(line)
    if lines and re.match(r"^(URL, ID, V|ID, started)", lines[0]):
        lines.sort()  # table rows come in member-id order, and ids differ
    return "\n".join(lines)


def _sort_members(text: str) -> str:
    """`member list -w json` lists members by id; ids differ, so order them by name."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and isinstance(data.get("members"), list):
        data["members"].sort(key=lambda member: member.get("name", ""))
        return json.dumps(data, separators=(",", ":")) + "\n"
    return text


def run_script(endpoints: list[str], binary: str, directory: Path) -> list[str]:
    transcript: list[str] = []
    lease = "0"
    for args, stdin in SCRIPT:
        actual = tuple(
            a.replace("{lease}", lease).replace("{snap}", str(directory / "s.db")) for a in args
        )
        # snapshot save takes exactly one endpoint, as with etcd.
        targets = endpoints[:1] if actual[0] == "snapshot" else endpoints
        result = etcd_procs.etcdctl(targets, *actual, stdin=stdin, binary=binary)
        match = re.match(r"lease ([0-9a-f]+) granted", result.stdout)
        if match:
            lease = match.group(1)
        error = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        transcript.append(
            f"$ etcdctl {' '.join(args)} -> {result.returncode}\n"
            + mask(result.stdout.replace(str(directory), "DIR"))
            + ("\n" + error[-1] if error else "")
        )
    return transcript


def watch_transcript(endpoints: list[str], binary: str) -> str:
    """`etcdctl watch --prefix --rev=6 b` replays history since revision 6 (after the
    compaction at 5), then shows a put made while it watches (on another member)."""
    process = subprocess.Popen(
        [binary, f"--endpoints={endpoints[0]}", "watch", "--prefix", "--rev=6", "b"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
    )
    lines: list[str] = []
    # A watch that never prints must not hang the test: kill it at the deadline.
    watchdog = threading.Timer(15.0, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        # b was put once (at 9) in the script, once more here: 3 lines per event.
        while len(lines) < 6:
            if len(lines) == 3:
                etcd_procs.etcdctl(endpoints[-1:], "put", "b", "live", binary=binary)
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
    finally:
        watchdog.cancel()
        process.kill()
        process.wait()
    return "\n".join(lines)


def elect_transcript(endpoints: list[str], binary: str) -> str:
    """`etcdctl elect -l e` observes while `elect e v1` campaigns and wins; `elect e v2`
    waits behind it until the first is interrupted (and resigns), then wins."""
    env = {"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"}

    def start(endpoint: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [binary, f"--endpoints={endpoint}", "elect", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )

    def lines(process: subprocess.Popen[str], count: int) -> list[str]:
        assert process.stdout is not None
        got = []
        while len(got) < count:
            line = process.stdout.readline()
            if not line:
                break
            got.append(line.rstrip("\n"))
        return got

    observer = start(endpoints[0], "-l", "e")
    first = start(endpoints[1], "e", "v1")
    second: subprocess.Popen[str] | None = None
    processes = [observer, first]
    # A step that never prints must not hang the test: kill them all at the deadline.
    watchdog = threading.Timer(20.0, lambda: [p.kill() for p in processes])
    watchdog.start()
    out: list[str] = []
    try:
        out += ["first: " + line for line in lines(first, 2)]
        out += ["observer: " + line for line in lines(observer, 2)]
        second = start(endpoints[2], "e", "v2")
        processes.append(second)
        etcd_procs.wait_for_keys(endpoints, binary, "e/", 2)
        out.append(f"second waiting: {second.poll() is None}")
        first.send_signal(signal.SIGINT)
        out.append(f"first exits {first.wait()}")
        out += ["second: " + line for line in lines(second, 2)]
        out += ["observer: " + line for line in lines(observer, 2)]
        second.send_signal(signal.SIGINT)
        out.append(f"second exits {second.wait()}")
    finally:
        watchdog.cancel()
        for process in processes:
            process.kill()
            process.wait()
    return mask("\n".join(out))


BINARIES = [b for b in (etcd_procs.ETCDCTL_35, etcd_procs.ETCDCTL_34) if b is not None]


@pytest.fixture(scope="module")
def transcripts(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[tuple[str, str], list[str]]]:
    """A fresh cluster for each (kind, etcdctl): the script counts on revisions from 1.
    The four are started together, so that their start-ups overlap."""
    results: dict[tuple[str, str], list[str]] = {}
    runs = [(kind, binary) for kind in ("etcd", "ours") for binary in BINARIES]
    directories = [tmp_path_factory.mktemp(f"{kind}-{Path(b).parent.name}") for kind, b in runs]
    kinds = [(kind, directory) for (kind, _), directory in zip(runs, directories, strict=True)]
    with etcd_procs.clusters(kinds, 3) as started:
        for (kind, binary), directory, cluster in zip(runs, directories, started, strict=True):
            steps = run_script(cluster.endpoints, binary, directory)
            steps.append("$ watch\n" + watch_transcript(cluster.endpoints, binary))
            steps.append("$ elect\n" + elect_transcript(cluster.endpoints, binary))
            results[(kind, binary)] = steps
    yield results


@pytest.mark.etcd
@pytest.mark.slow
@pytest.mark.parametrize("binary", BINARIES)
def test_etcdctl_transcript_matches_real_etcd(
    transcripts: dict[tuple[str, str], list[str]], binary: str
) -> None:
    expected = transcripts[("etcd", binary)]
    actual = transcripts[("ours", binary)]
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        assert got == want


@pytest.mark.etcd
@pytest.mark.parametrize("binary", BINARIES)
def test_etcdctl_script_succeeds_where_etcd_does(
    transcripts: dict[tuple[str, str], list[str]], binary: str
) -> None:
    # The script must exercise both outcomes, or the comparison proves little.
    heads = [step.split("\n", 1)[0] for step in transcripts[("etcd", binary)]]
    codes = [head.rsplit("-> ", 1)[1] for head in heads if head.startswith("$ etcdctl")]
    assert "0" in codes
    assert "1" in codes
