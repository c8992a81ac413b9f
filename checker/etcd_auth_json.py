"""History JSON <-> the model's auth requests and responses (etcd's Auth service).

Contract:
- One `f` per Auth method (AUTH_FS): auth_enable, auth_disable, auth_status,
  authenticate, user_add, user_get, user_list, user_delete, user_change_password,
  user_grant_role, user_revoke_role, role_add, role_get, role_list, role_delete,
  role_grant_permission, role_revoke_permission.
- Requests and responses use etcd v3 JSON field names (AuthUserAddRequest's `name`,
  `password`, `options.no_password`; AuthUserGrantRoleRequest's `user`, `role`;
  Permission's `permType` (READ, WRITE, READWRITE), `key`, `range_end`; AuthStatus's
  `enabled`, `authRevision`; ...). Names and passwords are strings; keys are strings or
  {"b64": ...} as everywhere in a history. Authenticate's token is never written (it is
  a secret and the model does not issue tokens); a password is written only when the
  writer has one (conformance runs record none: an absent password is "not recorded",
  and the model then takes any).
- Bad input raises EtcdJsonError naming the field. Hand-written rather than generated
  from checker/etcd_vocabulary.py: that table's kinds have no strings, and the Auth
  messages need no revision hints or write summaries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from etcdspec.checker.etcd_json import EtcdJsonError, as_object, field_bool, field_bytes
from etcdspec.checker.history import encode_bytes
from etcdspec.model.auth_requests import (
    AuthDisableRequest,
    AuthDoneResponse,
    AuthEnableRequest,
    AuthenticateRequest,
    AuthRequest,
    AuthResponse,
    AuthRoleAddRequest,
    AuthRoleDeleteRequest,
    AuthRoleGetRequest,
    AuthRoleGetResponse,
    AuthRoleGrantPermissionRequest,
    AuthRoleListRequest,
    AuthRoleListResponse,
    AuthRoleRevokePermissionRequest,
    AuthStatusRequest,
    AuthStatusResponse,
    AuthUserAddRequest,
    AuthUserChangePasswordRequest,
    AuthUserDeleteRequest,
    AuthUserGetRequest,
    AuthUserGetResponse,
    AuthUserGrantRoleRequest,
    AuthUserListRequest,
    AuthUserListResponse,
    AuthUserRevokeRoleRequest,
    Permission,
    PermType,
)
from etcdspec.model.requests import ResponseHeader


def _text(obj: dict[str, Any], name: str, path: str) -> str:
    value = obj.get(name, "")
    if not isinstance(value, str):
        raise EtcdJsonError(f"{path}.{name}", f"must be a string, got {value!r}")
    return value


def _secret(obj: dict[str, Any], name: str, path: str) -> str | None:
    """A password: None when the history does not record it."""
    return _text(obj, name, path) if name in obj else None


def _texts(obj: dict[str, Any], name: str, path: str) -> tuple[str, ...]:
    value = obj.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EtcdJsonError(f"{path}.{name}", f"must be a list of strings, got {value!r}")
    return tuple(value)


def permission_from_json(value: Any, path: str) -> Permission:
    obj = as_object(value, path)
    kind = obj.get("permType", "READ")
    if isinstance(kind, int) and kind in (0, 1, 2):
        perm_type = PermType(kind)
    elif isinstance(kind, str) and kind in PermType.__members__:
        perm_type = PermType[kind]
    else:
        raise EtcdJsonError(f"{path}.permType", f"must be READ, WRITE or READWRITE, got {kind!r}")
    return Permission(perm_type, field_bytes(obj, "key", path), field_bytes(obj, "range_end", path))


def permission_to_json(perm: Permission) -> dict[str, Any]:
    out: dict[str, Any] = {"permType": perm.perm_type.name, "key": encode_bytes(perm.key)}
    if perm.range_end:
        out["range_end"] = encode_bytes(perm.range_end)
    return out


_Reader = Callable[[dict[str, Any], str], AuthRequest]

_REQUESTS: dict[str, tuple[type, _Reader]] = {
    "auth_enable": (AuthEnableRequest, lambda o, p: AuthEnableRequest()),
    "auth_disable": (AuthDisableRequest, lambda o, p: AuthDisableRequest()),
    "auth_status": (AuthStatusRequest, lambda o, p: AuthStatusRequest()),
    "authenticate": (
        AuthenticateRequest,
        lambda o, p: AuthenticateRequest(_text(o, "name", p), _secret(o, "password", p)),
    ),
    "user_add": (
        AuthUserAddRequest,
        lambda o, p: AuthUserAddRequest(
            _text(o, "name", p),
            _secret(o, "password", p),
            field_bool(as_object(o.get("options", {}), f"{p}.options"), "no_password", p),
        ),
    ),
    "user_get": (AuthUserGetRequest, lambda o, p: AuthUserGetRequest(_text(o, "name", p))),
    "user_list": (AuthUserListRequest, lambda o, p: AuthUserListRequest()),
    "user_delete": (
        AuthUserDeleteRequest,
        lambda o, p: AuthUserDeleteRequest(_text(o, "name", p)),
    ),
    "user_change_password": (
        AuthUserChangePasswordRequest,
        lambda o, p: AuthUserChangePasswordRequest(_text(o, "name", p), _secret(o, "password", p)),
    ),
    "user_grant_role": (
        AuthUserGrantRoleRequest,
        lambda o, p: AuthUserGrantRoleRequest(_text(o, "user", p), _text(o, "role", p)),
    ),
    "user_revoke_role": (
        AuthUserRevokeRoleRequest,
        lambda o, p: AuthUserRevokeRoleRequest(_text(o, "name", p), _text(o, "role", p)),
    ),
    "role_add": (AuthRoleAddRequest, lambda o, p: AuthRoleAddRequest(_text(o, "name", p))),
    "role_get": (AuthRoleGetRequest, lambda o, p: AuthRoleGetRequest(_text(o, "role", p))),
    "role_list": (AuthRoleListRequest, lambda o, p: AuthRoleListRequest()),
    "role_delete": (
        AuthRoleDeleteRequest,
        lambda o, p: AuthRoleDeleteRequest(_text(o, "role", p)),
    ),
    "role_grant_permission": (
        AuthRoleGrantPermissionRequest,
        lambda o, p: AuthRoleGrantPermissionRequest(
            _text(o, "name", p),
            permission_from_json(o["perm"], f"{p}.perm") if "perm" in o else None,
        ),
    ),
    "role_revoke_permission": (
        AuthRoleRevokePermissionRequest,
        lambda o, p: AuthRoleRevokePermissionRequest(
            _text(o, "role", p), field_bytes(o, "key", p), field_bytes(o, "range_end", p)
        ),
    ),
}

AUTH_FS: tuple[str, ...] = tuple(_REQUESTS)
"""The history's `f` of each Auth method."""

_F_OF: dict[type, str] = {cls: f for f, (cls, _) in _REQUESTS.items()}


def auth_f(request: AuthRequest) -> str:
    """The history `f` of an auth request."""
    return _F_OF[type(request)]


def auth_request_from_json(f: str, value: Any, path: str = "value") -> AuthRequest:
    if f not in _REQUESTS:
        raise EtcdJsonError("f", f"{f!r} is not an auth operation ({', '.join(AUTH_FS)})")
    return _REQUESTS[f][1](as_object(value if value is not None else {}, path), path)


def auth_request_to_json(request: AuthRequest) -> tuple[str, dict[str, Any]]:
    """(f, value) of an auth request, in the form `auth_request_from_json` reads."""
    f = auth_f(request)
    fields: dict[str, Any] = {}
    for name in type(request).__dataclass_fields__:
        value = getattr(request, name)
        if name == "no_password":
            if value:
                fields["options"] = {"no_password": True}
        elif name == "perm":
            if value is not None:
                fields["perm"] = permission_to_json(value)
        elif isinstance(value, bytes):
            if value or name == "key":
                fields[name] = encode_bytes(value)
        elif name == "password":
            if value is not None:  # None: not recorded
                fields[name] = value
        elif value != "":
            fields[name] = value
    return f, fields


def auth_response_from_json(f: str, value: Any, path: str = "value") -> AuthResponse:
    """The response of auth operation `f`; the header is kept as written (the model does
    not judge an auth response's header)."""
    obj = as_object(value if value is not None else {}, path)
    revision = as_object(obj.get("header", {}), f"{path}.header").get("revision", 0)
    header = ResponseHeader(revision if isinstance(revision, int) else 0)
    if f == "auth_status":
        auth_revision = obj.get("authRevision", 0)
        if isinstance(auth_revision, str) and auth_revision.isdigit():
            auth_revision = int(auth_revision)
        if not isinstance(auth_revision, int):
            raise EtcdJsonError(
                f"{path}.authRevision", f"must be an integer, got {auth_revision!r}"
            )
        return AuthStatusResponse(header, bool(obj.get("enabled", False)), auth_revision)
    if f == "user_get":
        return AuthUserGetResponse(header, _texts(obj, "roles", path))
    if f == "user_list":
        return AuthUserListResponse(header, _texts(obj, "users", path))
    if f == "role_get":
        perms = obj.get("perm", [])
        if not isinstance(perms, list):
            raise EtcdJsonError(f"{path}.perm", f"must be a list, got {perms!r}")
        return AuthRoleGetResponse(
            header, tuple(permission_from_json(p, f"{path}.perm[{i}]") for i, p in enumerate(perms))
        )
    if f == "role_list":
        return AuthRoleListResponse(header, _texts(obj, "roles", path))
    if f not in _REQUESTS:
        raise EtcdJsonError("f", f"{f!r} is not an auth operation ({', '.join(AUTH_FS)})")
    method = {
        "user_change_password": "user_passwd",
        "role_grant_permission": "role_grant",
        "role_revoke_permission": "role_revoke",
    }.get(f, f)
    return AuthDoneResponse(header, method)


def auth_response_to_json(response: AuthResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"header": {"revision": response.header.revision}}
    if isinstance(response, AuthStatusResponse):
        out.update(enabled=response.enabled, authRevision=response.auth_revision)
    elif isinstance(response, AuthUserGetResponse):
        out["roles"] = list(response.roles)
    elif isinstance(response, (AuthUserListResponse,)):
        out["users"] = list(response.users)
    elif isinstance(response, AuthRoleGetResponse):
        out["perm"] = [permission_to_json(p) for p in response.perm]
    elif isinstance(response, AuthRoleListResponse):
        out["roles"] = list(response.roles)
    return out


def same_auth_answer(model: AuthResponse, recorded: AuthResponse) -> bool:
    """Whether the model's auth response is the recorded one, headers aside."""
    if isinstance(model, AuthDoneResponse) and isinstance(recorded, AuthDoneResponse):
        return model.method == recorded.method
    header = ResponseHeader(0)
    return type(model) is type(recorded) and model.__class__(
        header, *_body(model)
    ) == recorded.__class__(header, *_body(recorded))


def _body(response: AuthResponse) -> tuple[Any, ...]:
    names = [n for n in type(response).__dataclass_fields__ if n != "header"]
    return tuple(getattr(response, n) for n in names)
