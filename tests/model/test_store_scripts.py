"""Golden scripts for the store model: etcdctl-like commands and the model's answers.

Each file in tests/model/store_scripts/ is a golden transcript (tests/support/golden.py):
a line `> COMMAND` runs a command on the store (continuing from the previous one); the
lines under it, up to the next command, are the expected output (describe() texts;
`error CODE: message` for a request the store rejects, `error: ScriptError: ...` for a
line this interpreter cannot read). Lines starting with `#` are comments. Run with
--rewrite-golden to rewrite the expectations from the model's output.

Commands (etcdctl's names and flags):
  put KEY VALUE [--lease=N] [--prev-kv] [--ignore-value] [--ignore-lease]
  get KEY [END] [--prefix|--from-key] [--rev=N] [--limit=N] [--keys-only]
      [--count-only] [--sort-by=KEY|VERSION|CREATE|MODIFY|VALUE] [--order=ASCEND|DESCEND]
  del KEY [END] [--prefix|--from-key] [--prev-kv]
  txn COMPARE, ... ? OP; ... : OP; ...   (COMPARE: version(k) = 1, value(k) != "x", ...)
  compact REV
  lease grant TTL [--id=N] | lease revoke ID | lease keep-alive ID
  lease timetolive ID [--keys] | lease list
  watch KEY [END] [--prefix|--from-key] [--rev=N] [--prev-kv] [--progress]
  auth enable|disable|status | authenticate NAME PASSWORD
  user add NAME[:PASSWORD] [--no-password] | user get|delete NAME | user list
  user passwd NAME PASSWORD | user grant-role|revoke-role NAME ROLE
  role add|get|delete NAME | role list
  role grant-permission ROLE read|write|readwrite KEY [END] [--prefix|--from-key]
  role revoke-permission ROLE KEY [END] [--prefix|--from-key]
  as USER[@AUTHREV] COMMAND   (COMMAND as a client with USER's token; `as - ...`: no token)
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from golden import run_golden

from etcdspec.model.auth_requests import (
    AuthDisableRequest,
    AuthEnableRequest,
    AuthenticateRequest,
    AuthRequest,
    AuthRoleAddRequest,
    AuthRoleDeleteRequest,
    AuthRoleGetRequest,
    AuthRoleGrantPermissionRequest,
    AuthRoleListRequest,
    AuthRoleRevokePermissionRequest,
    AuthStatusRequest,
    AuthUserAddRequest,
    AuthUserChangePasswordRequest,
    AuthUserDeleteRequest,
    AuthUserGetRequest,
    AuthUserGrantRoleRequest,
    AuthUserListRequest,
    AuthUserRevokeRoleRequest,
    Permission,
    PermType,
)
from etcdspec.model.errors import StoreError
from etcdspec.model.requests import (
    RANGE_END_ALL,
    AsUser,
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    LeaseGrantRequest,
    LeaseKeepAliveRequest,
    LeaseLeasesRequest,
    LeaseRevokeRequest,
    LeaseTimeToLiveRequest,
    PutRequest,
    RangeRequest,
    Request,
    SortOrder,
    SortTarget,
    TxnOp,
    TxnRequest,
    prefix_end,
)
from etcdspec.model.store import StoreState, apply, initial_state
from etcdspec.model.watch import WatchRequest, watch_responses

SCRIPTS = Path(__file__).parent / "store_scripts"


class ScriptError(ValueError):
    """A script line the runner cannot read."""


def _split(words: list[str]) -> tuple[list[str], dict[str, str]]:
    args, flags = [], {}
    for word in words:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            flags[name] = value
        else:
            args.append(word)
    return args, flags


def _range_end(args: list[str], flags: dict[str, str]) -> bytes:
    key = args[0].encode()
    if "prefix" in flags:
        return prefix_end(key)
    if "from-key" in flags:
        return RANGE_END_ALL
    return args[1].encode() if len(args) > 1 else b""


_SORT = {
    "KEY": SortTarget.KEY,
    "VERSION": SortTarget.VERSION,
    "CREATE": SortTarget.CREATE,
    "MODIFY": SortTarget.MOD,
    "VALUE": SortTarget.VALUE,
}


def _op(text: str) -> TxnOp:
    words = shlex.split(text)
    verb, (args, flags) = words[0], _split(words[1:])
    if verb == "put":
        return PutRequest(
            args[0].encode(),
            args[1].encode() if len(args) > 1 else b"",
            int(flags.get("lease", "0")),
            "prev-kv" in flags,
            "ignore-value" in flags,
            "ignore-lease" in flags,
        )
    if verb == "get":
        return RangeRequest(
            args[0].encode(),
            _range_end(args, flags),
            limit=int(flags.get("limit", "0")),
            revision=int(flags.get("rev", "0")),
            keys_only="keys-only" in flags,
            count_only="count-only" in flags,
            sort_order=SortOrder[flags.get("order", "NONE")],
            sort_target=_SORT[flags.get("sort-by", "KEY")],
        )
    if verb == "del":
        return DeleteRangeRequest(args[0].encode(), _range_end(args, flags), "prev-kv" in flags)
    if verb == "txn":
        return _txn(text.split(None, 1)[1] if " " in text.strip() else "")
    raise ScriptError(f"unknown op {verb!r} in {text!r}: use put, get, del or txn")


_SIGNS = {
    "=": CompareResult.EQUAL,
    "!=": CompareResult.NOT_EQUAL,
    ">": CompareResult.GREATER,
    "<": CompareResult.LESS,
}
_TARGETS = {
    "version": CompareTarget.VERSION,
    "create": CompareTarget.CREATE,
    "mod": CompareTarget.MOD,
    "value": CompareTarget.VALUE,
    "lease": CompareTarget.LEASE,
}


def _compare(text: str) -> Compare:
    words = shlex.split(text)
    if len(words) != 3 or "(" not in words[0] or not words[0].endswith(")"):
        raise ScriptError(f"compare {text!r}: write it as target(key) op operand")
    target_name, _, key = words[0][:-1].partition("(")
    target = _TARGETS[target_name]
    operand: int | bytes = words[2].encode() if target is CompareTarget.VALUE else int(words[2])
    return Compare(key.encode(), target, _SIGNS[words[1]], operand)


def _txn(text: str) -> TxnRequest:
    compares, _, rest = text.partition("?")
    success, _, failure = rest.partition(":")

    def ops(part: str) -> tuple[TxnOp, ...]:
        return tuple(_op(op) for op in part.split(";") if op.strip())

    return TxnRequest(
        tuple(_compare(c) for c in compares.split(",") if c.strip()), ops(success), ops(failure)
    )


def _auth_request(verb: str, args: list[str], flags: dict[str, str]) -> AuthRequest | None:
    sub, rest = (args[0], args[1:]) if args else ("", [])
    if verb == "auth":
        return {
            "enable": AuthEnableRequest(),
            "disable": AuthDisableRequest(),
            "status": AuthStatusRequest(),
        }.get(sub)
    if verb == "authenticate":
        return AuthenticateRequest(args[0], args[1])
    if verb == "user":
        if sub == "add":
            name, _, password = rest[0].partition(":")
            return AuthUserAddRequest(name, password, "no-password" in flags)
        simple = {"get": AuthUserGetRequest, "delete": AuthUserDeleteRequest}
        if sub in simple:
            return simple[sub](rest[0])
        if sub == "list":
            return AuthUserListRequest()
        if sub == "passwd":
            return AuthUserChangePasswordRequest(rest[0], rest[1])
        if sub == "grant-role":
            return AuthUserGrantRoleRequest(rest[0], rest[1])
        if sub == "revoke-role":
            return AuthUserRevokeRoleRequest(rest[0], rest[1])
    if verb == "role":
        if sub == "add":
            return AuthRoleAddRequest(rest[0])
        if sub == "get":
            return AuthRoleGetRequest(rest[0])
        if sub == "delete":
            return AuthRoleDeleteRequest(rest[0])
        if sub == "list":
            return AuthRoleListRequest()
        if sub == "grant-permission":
            where = rest[2:]
            perm = Permission(
                PermType[rest[1].upper()], where[0].encode(), _range_end(where, flags)
            )
            return AuthRoleGrantPermissionRequest(rest[0], perm)
        if sub == "revoke-permission":
            where = rest[1:]
            return AuthRoleRevokePermissionRequest(
                rest[0], where[0].encode(), _range_end(where, flags)
            )
    return None


def _request(line: str) -> Request | AuthRequest | AsUser | tuple[WatchRequest, bool]:
    words = shlex.split(line)
    verb = words[0]
    if verb == "as":
        who, _, at = words[1].partition("@")
        inner = _request(line.split(None, 2)[2])
        if isinstance(inner, (tuple, AsUser)):
            raise ScriptError(f"{line!r}: `as` takes one request, not a watch or another `as`")
        return AsUser("" if who == "-" else who, inner, int(at or "0"))
    if verb in ("put", "get", "del"):
        return _op(line)
    if verb == "txn":
        return _txn(line.split(None, 1)[1] if len(words) > 1 else "")
    args, flags = _split(words[1:])
    if verb == "compact":
        return CompactionRequest(int(args[0]))
    if verb == "lease":
        sub = args[0]
        if sub == "grant":
            return LeaseGrantRequest(int(args[1]), int(flags.get("id", "0")))
        if sub == "revoke":
            return LeaseRevokeRequest(int(args[1]))
        if sub == "keep-alive":
            return LeaseKeepAliveRequest(int(args[1]))
        if sub == "timetolive":
            return LeaseTimeToLiveRequest(int(args[1]), "keys" in flags)
        if sub == "list":
            return LeaseLeasesRequest()
    if verb == "watch":
        request = WatchRequest(
            args[0].encode(),
            _range_end(args, flags),
            start_revision=int(flags.get("rev", "0")),
            prev_kv="prev-kv" in flags,
        )
        return (request, "progress" in flags)
    auth = _auth_request(verb, args, flags)
    if auth is not None:
        return auth
    raise ScriptError(f"unknown command {line!r}; see this module's docstring")


class StoreInterpreter:
    """The golden runner's interpreter for the store model: one store, from empty."""

    def __init__(self) -> None:
        self.state: StoreState = initial_state()

    def run(self, line: str) -> list[str]:
        request = _request(line)
        if isinstance(request, tuple):
            watch, progress = request
            responses = watch_responses(self.state, watch, progress=progress)
            return [r.describe() for r in responses]
        try:
            self.state, response = apply(self.state, request)
        except StoreError as error:
            return [f"error {error.code}: {error.message}"]
        return [response.describe()]


@pytest.mark.parametrize("path", sorted(SCRIPTS.glob("*.txt")), ids=lambda p: p.stem)
def test_store_script(path: Path, rewrite_golden: bool) -> None:
    run_golden(path, StoreInterpreter, rewrite=rewrite_golden)


def test_store_scripts_exist() -> None:
    assert len(list(SCRIPTS.glob("*.txt"))) >= 3


def test_store_script_rejects_unknown_commands() -> None:
    with pytest.raises(ScriptError, match="unknown command"):
        StoreInterpreter().run("frobnicate a")
