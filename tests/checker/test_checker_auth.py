"""The etcd model judges who may do what: histories whose operations carry their user.

A request that should have been denied and took effect is a violation; so is a permitted
request that was refused; refusals and grants that fit the auth store's history hold,
including a permission revoked concurrently with a request (either order is allowed).
"""

from __future__ import annotations

from typing import Any

import pytest

from etcdspec.checker.etcd_auth_json import (
    AUTH_FS,
    auth_request_from_json,
    auth_request_to_json,
    auth_response_from_json,
    auth_response_to_json,
)
from etcdspec.checker.history import HistoryBuilder, parse_history_text
from etcdspec.checker.linearizability import check_linearizable
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.model.auth_requests import (
    AuthRoleGetResponse,
    AuthRoleGrantPermissionRequest,
    AuthStatusResponse,
    AuthUserAddRequest,
    Permission,
    PermType,
)
from etcdspec.model.requests import ResponseHeader
from etcdspec.verdict import Verdict

DENIED = {"error": "etcdserver: permission denied", "code": "PERMISSION_DENIED"}
NO_TOKEN = {"error": "etcdserver: user name is empty", "code": "INVALID_ARGUMENT"}
OLD = {"error": "auth: revision in header is old", "code": "UNKNOWN"}

# The set-up every history starts with: root, the role `reader` (READ a..c, WRITE a),
# alice holding it, auth enabled.
SETUP: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("user_add", {"name": "root", "password": "r"}, {}),
    ("user_grant_role", {"user": "root", "role": "root"}, {}),
    ("role_add", {"name": "reader"}, {}),
    (
        "role_grant_permission",
        {"name": "reader", "perm": {"permType": "READ", "key": "a", "range_end": "c"}},
        {},
    ),
    (
        "role_grant_permission",
        {"name": "reader", "perm": {"permType": "WRITE", "key": "a"}},
        {},
    ),
    ("user_add", {"name": "alice", "password": "p"}, {}),
    ("user_grant_role", {"user": "alice", "role": "reader"}, {}),
    ("auth_enable", {}, {}),
    ("auth_status", {}, {"enabled": True, "authRevision": 8}),
]

Row = tuple[Any, str, str, Any, str | None]


def _history(rows: list[Row]) -> Any:
    builder = HistoryBuilder()
    for f, request, response in SETUP:
        builder.add("admin", "invoke", f, request)
        builder.add("admin", "ok", f, response)
    for process, type_, f, value, user in rows:
        builder.add(process, type_, f, value, user=user if type_ == "invoke" else None)
    return builder.history()


def _verdict(rows: list[Row]) -> Verdict:
    return check_linearizable(EtcdModel(), _history(rows).operations).verdict


def _op(
    process: int, f: str, request: Any, kind: str, response: Any, user: str | None
) -> list[Row]:
    return [(process, "invoke", f, request, user), (process, kind, f, response, None)]


PUT_A = {"key": "a", "value": "1"}
PUT_B = {"key": "b", "value": "1"}
REV = {"header": {"revision": 2}}

CASES: list[tuple[str, list[Row], Verdict]] = [
    ("a permitted put took effect", _op(1, "put", PUT_A, "ok", REV, "alice"), Verdict.TRUE),
    ("a denied put was refused", _op(1, "put", PUT_B, "fail", DENIED, "alice"), Verdict.TRUE),
    ("a denied put took effect", _op(1, "put", PUT_B, "ok", REV, "alice"), Verdict.FALSE),
    ("a permitted put was refused", _op(1, "put", PUT_A, "fail", DENIED, "alice"), Verdict.FALSE),
    ("no token: refused", _op(1, "put", PUT_A, "fail", NO_TOKEN, ""), Verdict.TRUE),
    ("no token yet it took effect", _op(1, "put", PUT_A, "ok", REV, ""), Verdict.FALSE),
    ("root may write anywhere", _op(1, "put", PUT_B, "ok", REV, "root"), Verdict.TRUE),
    (
        "a read outside the grant answered",
        _op(1, "range", {"key": "a", "range_end": "d"}, "ok", {"header": {"revision": 1}}, "alice"),
        Verdict.FALSE,
    ),
    (
        "an old token's refusal is not judged",
        _op(1, "put", PUT_A, "fail", OLD, "alice"),
        Verdict.TRUE,
    ),
    (
        "a put of unknown outcome that was denied cannot explain a later read",
        _op(1, "put", PUT_B, "info", None, "alice")
        + _op(
            2,
            "range",
            {"key": "b"},
            "ok",
            {
                "header": {"revision": 2},
                "kvs": [
                    {
                        "key": "b",
                        "value": "1",
                        "create_revision": 2,
                        "mod_revision": 2,
                        "version": 1,
                    }
                ],
                "count": 1,
            },
            "root",
        ),
        Verdict.FALSE,
    ),
    (
        "a non-root user may not list users",
        _op(1, "user_list", {}, "ok", {"users": ["alice", "root"]}, "alice"),
        Verdict.FALSE,
    ),
    (
        "a non-root user is refused user_list",
        _op(1, "user_list", {}, "fail", DENIED, "alice"),
        Verdict.TRUE,
    ),
    (
        "a revoke concurrent with a put: the put may come first",
        [
            (1, "invoke", "role_revoke_permission", {"role": "reader", "key": "a"}, "root"),
            (2, "invoke", "put", PUT_A, "alice"),
            (2, "ok", "put", REV, None),
            (1, "ok", "role_revoke_permission", {}, None),
        ],
        Verdict.TRUE,
    ),
    (
        "a revoke concurrent with a put: the refusal comes after it",
        [
            (1, "invoke", "role_revoke_permission", {"role": "reader", "key": "a"}, "root"),
            (2, "invoke", "put", PUT_A, "alice"),
            (2, "fail", "put", DENIED, None),
            (1, "ok", "role_revoke_permission", {}, None),
        ],
        Verdict.TRUE,
    ),
    (
        "a put after the revoke returned still took effect",
        _op(1, "role_revoke_permission", {"role": "reader", "key": "a"}, "ok", {}, "root")
        + _op(2, "put", PUT_A, "ok", REV, "alice"),
        Verdict.FALSE,
    ),
    (
        "auth_status reports the wrong auth revision",
        _op(1, "auth_status", {}, "ok", {"enabled": True, "authRevision": 3}, "root"),
        Verdict.FALSE,
    ),
]


@pytest.mark.parametrize(("name", "rows", "verdict"), CASES, ids=[c[0] for c in CASES])
def test_the_etcd_model_judges_allow_and_deny(name: str, rows: list[Row], verdict: Verdict) -> None:
    assert _verdict(rows) is verdict, name


def test_a_violation_names_the_user_and_the_refusal() -> None:
    history = _history(_op(1, "put", PUT_A, "fail", DENIED, "alice"))
    result = check_linearizable(EtcdModel(), history.operations)
    text = result.describe() if hasattr(result, "describe") else str(result)
    assert result.verdict is Verdict.FALSE
    assert "alice" in text and "permission denied" in text


def test_histories_without_users_are_judged_as_before() -> None:
    builder = HistoryBuilder()
    builder.add(1, "invoke", "put", PUT_B)
    builder.add(1, "fail", "put", DENIED)  # no user: a fail is dropped, as always
    builder.add(1, "invoke", "put", PUT_B)
    builder.add(1, "ok", "put", REV)
    assert check_linearizable(EtcdModel(), builder.history().operations).verdict is Verdict.TRUE


@pytest.mark.parametrize("f", AUTH_FS)
def test_auth_requests_round_trip_through_history_json(f: str) -> None:
    samples: dict[str, dict[str, Any]] = {
        "authenticate": {"name": "alice", "password": "p"},
        "user_add": {"name": "bob", "password": "x", "options": {"no_password": True}},
        "user_get": {"name": "bob"},
        "user_delete": {"name": "bob"},
        "user_change_password": {"name": "bob", "password": "y"},
        "user_grant_role": {"user": "bob", "role": "r"},
        "user_revoke_role": {"name": "bob", "role": "r"},
        "role_add": {"name": "r"},
        "role_get": {"role": "r"},
        "role_delete": {"role": "r"},
        "role_grant_permission": {
            "name": "r",
            "perm": {"permType": "READWRITE", "key": "a", "range_end": "\x00"},
        },
        "role_revoke_permission": {"role": "r", "key": "a", "range_end": "b"},
    }
    request = auth_request_from_json(f, samples.get(f, {}))
    assert auth_request_to_json(request) == (f, samples.get(f, {}))


def test_auth_responses_round_trip_and_bad_input_is_named() -> None:
    status = AuthStatusResponse(ResponseHeader(4), True, 9)
    assert auth_response_from_json("auth_status", auth_response_to_json(status)) == status
    perm = AuthRoleGetResponse(ResponseHeader(1), (Permission(PermType.WRITE, b"k", b"\x00"),))
    assert auth_response_from_json("role_get", auth_response_to_json(perm)) == perm
    assert auth_request_to_json(AuthUserAddRequest("u", "p")) == (
        "user_add",
        {"name": "u", "password": "p"},
    )
    with pytest.raises(ValueError, match="permType"):
        auth_request_from_json(
            "role_grant_permission", {"name": "r", "perm": {"permType": "ALL", "key": "a"}}
        )
    assert AuthRoleGrantPermissionRequest("r", None) == auth_request_from_json(
        "role_grant_permission", {"name": "r"}
    )


def test_a_history_file_with_users_checks_end_to_end(tmp_path: Any) -> None:
    from etcdspec.checker.check import CheckOptions, check_history
    from etcdspec.checker.history import write_history

    history = _history(_op(1, "put", PUT_B, "ok", REV, "alice"))
    path = tmp_path / "h.jsonl"
    write_history(history.events, path)
    report = check_history(parse_history_text(path.read_text()), CheckOptions(model="etcd"))
    assert report.verdict is Verdict.FALSE
