"""The JSON gateway's Auth, Lock and Election paths against real etcd 3.5.1: one script
of requests (users and roles made, auth enabled, a token from /v3/auth/authenticate sent
as the Authorization header, requests allowed and denied; a lock taken and released; an
election campaigned, proclaimed, asked and resigned) to a 1-member etcd and a 1-member
cluster of ours, status codes and JSON bodies compared.

Masked, as they must differ: header cluster_id, member_id and raft_term; the token's
text; lease ids, and the lock and election keys made from them (name/<lease id in hex>).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import etcd_procs
import pytest
from test_impl_client_http import Answer, masked

pytestmark = pytest.mark.etcd


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def post(endpoint: str, path: str, body: dict[str, Any], token: str = "") -> Answer:
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=15)
    try:
        headers = {"Authorization": token} if token else {}
        connection.request("POST", path, body=json.dumps(body), headers=headers)
        response = connection.getresponse()
        raw = response.read().decode()
        content_type = response.getheader("Content-Type", "")
    finally:
        connection.close()
    try:
        parsed: Any = json.loads(raw)
    except ValueError:
        parsed = raw
    return Answer(response.status, content_type, parsed)


def run_script(endpoint: str) -> list[tuple[str, Answer]]:
    """The script's steps and answers, what must differ replaced by stable names."""
    steps: list[tuple[str, Answer]] = []
    names: dict[str, str] = {}

    def step(name: str, path: str, body: dict[str, Any], token: str = "") -> Answer:
        answer = post(endpoint, path, body, token)
        steps.append((name, answer))
        return answer

    lease = step("lease grant", "/v3/lease/grant", {"TTL": 30}).body["ID"]
    names[lease] = "<lease>"
    for name in ("l1", "e1"):
        names[b64(f"{name}/{int(lease):x}")] = f"<{name} key>"
    lock = step("lock", "/v3/lock/lock", {"name": b64("l1"), "lease": lease})
    step("lock again by key", "/v3/kv/range", {"key": lock.body.get("key", "")})
    step("unlock", "/v3/lock/unlock", {"key": lock.body.get("key", "")})
    campaign = step(
        "campaign", "/v3/election/campaign", {"name": b64("e1"), "lease": lease, "value": b64("v1")}
    )
    leader_key = campaign.body.get("leader", {})
    step("leader", "/v3/election/leader", {"name": b64("e1")})
    step("proclaim", "/v3/election/proclaim", {"leader": leader_key, "value": b64("v2")})
    step("leader after proclaim", "/v3/election/leader", {"name": b64("e1")})
    step("resign", "/v3/election/resign", {"leader": leader_key})
    step("leader after resign", "/v3/election/leader", {"name": b64("e1")})

    step("enable without root", "/v3/auth/enable", {})
    step("add root", "/v3/auth/user/add", {"name": "root", "password": "rootpw"})
    step("add root role", "/v3/auth/role/add", {"name": "root"})
    step("grant root", "/v3/auth/user/grant", {"user": "root", "role": "root"})
    step("add alice", "/v3/auth/user/add", {"name": "alice", "password": "alicepw"})
    step("add alice again", "/v3/auth/user/add", {"name": "alice", "password": "x"})
    step("add role app", "/v3/auth/role/add", {"name": "app"})
    perm = {"permType": "READWRITE", "key": b64("app/"), "range_end": b64("app0")}
    step("grant app/", "/v3/auth/role/grant", {"name": "app", "perm": perm})
    step("grant alice app", "/v3/auth/user/grant", {"user": "alice", "role": "app"})
    step("role get", "/v3/auth/role/get", {"role": "app"})
    step("user list", "/v3/auth/user/list", {})
    step("enable", "/v3/auth/enable", {})
    step("put without a token", "/v3/kv/put", {"key": b64("app/x"), "value": b64("1")})
    step("wrong password", "/v3/auth/authenticate", {"name": "alice", "password": "no"})
    auth = step("authenticate", "/v3/auth/authenticate", {"name": "alice", "password": "alicepw"})
    token = str(auth.body.get("token", ""))
    names[token] = "<token>"
    step("put in app/", "/v3/kv/put", {"key": b64("app/x"), "value": b64("1")}, token)
    step("put outside", "/v3/kv/put", {"key": b64("other"), "value": b64("1")}, token)
    step("range app/", "/v3/kv/range", {"key": b64("app/"), "range_end": b64("app0")}, token)
    step("status as alice", "/v3/auth/status", {}, token)
    step("forged token", "/v3/kv/range", {"key": b64("app/x")}, "forged.token")
    root = step("root", "/v3/auth/authenticate", {"name": "root", "password": "rootpw"})
    root_token = str(root.body.get("token", ""))
    names[root_token] = "<root token>"
    step("status as root", "/v3/auth/status", {}, root_token)
    step(
        "revoke app/",
        "/v3/auth/role/revoke",
        {"role": "app", "key": b64("app/"), "range_end": b64("app0")},
        root_token,
    )
    step("put in app/ revoked", "/v3/kv/put", {"key": b64("app/y"), "value": b64("1")}, token)
    step("disable", "/v3/auth/disable", {}, root_token)
    return [(name, rename(answer, names)) for name, answer in steps]


def rename(answer: Answer, names: dict[str, str]) -> Answer:
    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return names.get(value, value) if isinstance(value, str) else value

    return Answer(answer.status, answer.content_type, walk(masked(answer.body)))


@pytest.fixture(scope="module")
def transcripts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Any]]]:
    out: dict[str, list[Any]] = {}
    for kind in ("etcd", "ours"):
        with etcd_procs.cluster(kind, tmp_path_factory.mktemp(f"gw-{kind}"), 1) as cluster:
            out[kind] = run_script(cluster.endpoints[0])
    yield out


def test_gateway_auth_lock_election_answer_as_etcd(transcripts: dict[str, list[Any]]) -> None:
    etcd, ours = transcripts["etcd"], transcripts["ours"]
    assert [name for name, _ in ours] == [name for name, _ in etcd]
    for (name, want), (_, got) in zip(etcd, ours, strict=True):
        assert (got.status, got.body) == (want.status, want.body), (
            f"{name}: etcd {want.describe()}\nours {got.describe()}"
        )


def test_the_script_sees_allowed_and_denied_on_etcd(transcripts: dict[str, list[Any]]) -> None:
    answers = dict(transcripts["etcd"])
    assert answers["put in app/"].status == 200
    assert answers["put outside"].status == 403
    assert answers["forged token"].status == 401
    assert answers["put in app/ revoked"].status == 403
    assert answers["lock"].status == 200 and answers["lock"].body["key"] == "<l1 key>"
    assert answers["leader after proclaim"].body["kv"]["value"] == b64("v2")
