"""etcdctl's `user`, `role` and `auth` commands and `--user` against a 3-member cluster
of ours and against real etcd: same script, same transcript (output, exit code, the
error's last line).

The script builds users and roles with key, prefix, range and from-key permissions,
enables auth (etcdctl adds the root role itself), then tries reads, writes, txns and
maintenance as root, as a user with some permissions, with a wrong password, as an
unknown user and with no user at all; revokes permissions and roles, changes a password,
tries to break the root rules, watches as a permitted and a refused user, and disables
auth. etcdctl picks any of the three endpoints, so a token issued by one member is used
at another.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import etcd_procs
import pytest

ROOT = "--user=root:rootpw"
ALICE = "--user=alice:alicepw"
ALICE2 = "--user=alice:newpw"

# (etcdctl arguments, stdin)
SETUP: list[tuple[tuple[str, ...], str | None]] = [
    (("user", "add", "root:rootpw"), None),
    (("user", "add", "alice:alicepw"), None),
    (("user", "add", "alice:again"), None),
    (("user", "list"), None),
    (("user", "get", "alice"), None),
    (("role", "add", "reader"), None),
    (("role", "add", "writer"), None),
    (("role", "add", "reader"), None),
    (("role", "grant-permission", "reader", "read", "foo"), None),
    (("role", "grant-permission", "writer", "readwrite", "--prefix", "p/"), None),
    (("role", "grant-permission", "writer", "write", "k1", "k3"), None),
    (("role", "grant-permission", "reader", "read", "--from-key", "m"), None),
    (("role", "grant-permission", "nope", "read", "x"), None),
    (("role", "get", "reader"), None),
    (("role", "get", "writer"), None),
    (("role", "get", "nope"), None),
    (("role", "list"), None),
    (("user", "grant-role", "alice", "reader"), None),
    (("user", "grant-role", "alice", "writer"), None),
    (("user", "grant-role", "alice", "nope"), None),
    (("user", "get", "alice"), None),
    (("user", "get", "nobody"), None),
    (("auth", "enable"), None),  # root lacks the root role: etcdctl adds and grants it
    (("user", "grant-role", "root", "root"), None),
    (("auth", "enable"), None),
    (("role", "list"), None),
    ((ROOT, "auth", "status"), None),
    ((ROOT, "user", "add", "bob", "--no-password"), None),
    ((ROOT, "user", "grant-role", "bob", "reader"), None),
    (("--user=bob:anything", "get", "foo"), None),
    ((ROOT, "user", "get", "alice", "--detail"), None),
    ((ROOT, "user", "get", "bob", "-w", "json"), None),
    ((ROOT, "role", "get", "writer", "-w", "json"), None),
    (("put", "foo", "bar"), None),
    (("get", "foo"), None),
    ((ROOT, "put", "foo", "x"), None),
    ((ALICE, "put", "p/1", "x"), None),
    ((ALICE, "put", "foo", "y"), None),
    ((ALICE, "get", "foo"), None),
    ((ALICE, "get", "p/", "--prefix"), None),
    ((ALICE, "get", "k1", "k3"), None),
    ((ALICE, "put", "k2", "v"), None),
    ((ALICE, "get", "m", "--from-key"), None),
    ((ALICE, "get", "a", "--from-key"), None),
    ((ALICE, "del", "p/", "--prefix"), None),
    ((ALICE, "del", "foo"), None),
    (("--user=alice:wrong", "get", "foo"), None),
    (("--user=bob:x", "get", "foo"), None),
    ((ALICE, "txn", "-i"), 'value("foo") = "x"\n\nput p/2 y\n\nput zz y\n\n'),
    ((ALICE, "txn", "-i"), 'value("zz") = "x"\n\nput p/2 y\n\n\n'),
    ((ALICE, "txn", "-i"), 'value("p/2") = "y"\n\nget zz\n\n\n'),
    ((ALICE, "user", "list"), None),
    ((ALICE, "user", "get", "alice"), None),
    ((ALICE, "user", "get", "root"), None),
    ((ALICE, "role", "get", "reader"), None),
    ((ALICE, "role", "get", "writer2"), None),
    ((ALICE, "role", "add", "mine"), None),
    ((ALICE, "defrag"), None),
    (("defrag",), None),
    ((ROOT, "defrag"), None),
    ((ALICE, "compaction", "2"), None),
    ((ALICE, "alarm", "list"), None),
    ((ROOT, "user", "list"), None),
    ((ROOT, "role", "revoke-permission", "writer", "p/", "--prefix"), None),
    ((ROOT, "role", "revoke-permission", "writer", "p/", "--prefix"), None),
    ((ALICE, "put", "p/3", "z"), None),
    ((ROOT, "user", "revoke-role", "alice", "reader"), None),
    ((ROOT, "user", "revoke-role", "alice", "reader"), None),
    ((ROOT, "user", "passwd", "alice", "--interactive=false"), "newpw\n"),
    ((ALICE, "get", "foo"), None),
    ((ALICE2, "get", "foo"), None),
    ((ALICE2, "put", "k1", "z"), None),
    ((ROOT, "user", "delete", "root"), None),
    ((ROOT, "user", "revoke-role", "root", "root"), None),
    ((ROOT, "role", "get", "root"), None),
    ((ROOT, "role", "delete", "root"), None),
]

TEARDOWN: list[tuple[tuple[str, ...], str | None]] = [
    ((ROOT, "role", "delete", "writer"), None),
    ((ROOT, "user", "get", "alice"), None),
    ((ROOT, "auth", "status"), None),
    ((ROOT, "auth", "disable"), None),
    (("user", "delete", "alice"), None),
    (("user", "list"), None),
    (("role", "list"), None),
    (("put", "foo", "free"), None),
    (("get", "foo"), None),
]

_MASKS = [
    (re.compile(r"http://127\.0\.0\.1:\d+"), "URL"),
    (re.compile(r"lease [0-9a-f]+ granted"), "lease ID granted"),
    (re.compile(r'"(cluster_id|member_id|raft_term)":\d+'), r'"\1":N'),
]


def mask(text: str) -> str:
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text


def run_script(
    script: list[tuple[tuple[str, ...], str | None]], endpoints: list[str], binary: str
) -> list[str]:
    transcript = []
    for args, stdin in script:
        result = etcd_procs.etcdctl(endpoints, *args, stdin=stdin, binary=binary)
        errors = [
            line for line in result.stderr.splitlines() if line.strip() and not line.startswith("{")
        ]
        transcript.append(
            f"$ etcdctl {' '.join(args)} -> {result.returncode}\n"
            + mask(result.stdout.rstrip())
            + ("\n" + mask(errors[-1]) if errors else "")
        )
    return transcript


def watch(endpoints: list[str], binary: str, *args: str, lines_wanted: int) -> str:
    """What `etcdctl watch ARGS` prints: `lines_wanted` lines, or all it prints before
    it exits; killed at a deadline if it does neither."""
    process = subprocess.Popen(
        [binary, f"--endpoints={endpoints[0]}", "watch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
    )
    lines: list[str] = []
    watchdog = threading.Timer(15.0, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        while len(lines) < lines_wanted:
            line = process.stdout.readline()
            if not line:
                break
            if not line.startswith("{"):
                lines.append(line.rstrip("\n"))
    finally:
        watchdog.cancel()
        process.kill()
        process.wait()
    return f"$ etcdctl watch {' '.join(args)}\n" + "\n".join(lines)


BINARIES = [b for b in (etcd_procs.ETCDCTL_35, etcd_procs.ETCDCTL_34) if b is not None]


@pytest.fixture(scope="module")
def transcripts(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[tuple[str, str], list[str]]]:
    """A fresh cluster for each (kind, etcdctl): the script starts from no users and
    counts on revisions from 1. The four are started together, so that their start-ups
    overlap. Passwords are hashed at bcrypt cost 4 on both servers (etcd's minimum; its
    default 10 makes every authenticated call cost ~60 ms of bcrypt, ~250 calls here):
    the transcript shows no hash, and tests/impl/server/test_impl_bcrypt_cost.py checks
    the cost itself."""
    results: dict[tuple[str, str], list[str]] = {}
    runs = [(kind, binary) for kind in ("etcd", "ours") for binary in BINARIES]
    kinds = [
        (kind, tmp_path_factory.mktemp(f"auth-{kind}-{Path(binary).parent.name}"))
        for kind, binary in runs
    ]
    with etcd_procs.clusters(kinds, 3, flags=("--bcrypt-cost=4",)) as started:
        for (kind, binary), cluster in zip(runs, started, strict=True):
            endpoints = cluster.endpoints
            steps = run_script(SETUP, endpoints, binary)
            # Root replays k's history (k2 then k1, from revision 3 on); alice, who
            # may no longer read foo, is refused at once.
            steps.append(watch(endpoints, binary, ROOT, "--prefix", "--rev=3", "k", lines_wanted=6))
            steps.append(watch(endpoints, binary, ALICE2, "foo", lines_wanted=10))
            steps.extend(run_script(TEARDOWN, endpoints, binary))
            results[(kind, binary)] = steps
    yield results


@pytest.mark.etcd
@pytest.mark.slow
@pytest.mark.parametrize("binary", BINARIES)
def test_etcdctl_auth_transcript_matches_real_etcd(
    transcripts: dict[tuple[str, str], list[str]], binary: str
) -> None:
    expected = transcripts[("etcd", binary)]
    actual = transcripts[("ours", binary)]
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        assert got == want


@pytest.mark.etcd
@pytest.mark.slow
@pytest.mark.parametrize("binary", BINARIES)
def test_etcdctl_auth_script_meets_every_outcome(
    transcripts: dict[tuple[str, str], list[str]], binary: str
) -> None:
    """The script must see success, refusal and failed authentication (exit 2), or the
    comparison proves little; and the refusals it must see are etcd's."""
    steps = transcripts[("etcd", binary)]
    codes = {step.split("\n", 1)[0].rsplit("-> ", 1)[-1] for step in steps if "-> " in step}
    assert {"0", "1", "2"} <= codes
    text = "\n".join(steps)
    for message in (
        "etcdserver: permission denied",
        "etcdserver: user name is empty",
        "etcdserver: authentication failed, invalid user ID or password",
        "etcdserver: invalid auth management",
        "auth: permission denied",
    ):
        assert message in text
