"""Protobuf <-> the model's auth requests and responses, for conformance runs: which Auth
method serves each request, its etcdserverpb message, and the model response read back.

Contract: `auth_method(request)` is the Auth service's method name; `auth_to_pb` builds
the request message (passwords in `password`: the server hashes them, as etcd's does);
`auth_from_pb(request, message)` reads the reply as the model's response, with the
header's revision. Authenticate's token is returned by `token_of`, never put in a
model response (histories do not hold secrets the model has no use for).
"""

from __future__ import annotations

from typing import Any

from etcdspec.impl.pb import auth_pb2, rpc_pb2
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

_METHODS: dict[type, str] = {
    AuthEnableRequest: "AuthEnable",
    AuthDisableRequest: "AuthDisable",
    AuthStatusRequest: "AuthStatus",
    AuthenticateRequest: "Authenticate",
    AuthUserAddRequest: "UserAdd",
    AuthUserGetRequest: "UserGet",
    AuthUserListRequest: "UserList",
    AuthUserDeleteRequest: "UserDelete",
    AuthUserChangePasswordRequest: "UserChangePassword",
    AuthUserGrantRoleRequest: "UserGrantRole",
    AuthUserRevokeRoleRequest: "UserRevokeRole",
    AuthRoleAddRequest: "RoleAdd",
    AuthRoleGetRequest: "RoleGet",
    AuthRoleListRequest: "RoleList",
    AuthRoleDeleteRequest: "RoleDelete",
    AuthRoleGrantPermissionRequest: "RoleGrantPermission",
    AuthRoleRevokePermissionRequest: "RoleRevokePermission",
}


def auth_method(request: AuthRequest) -> str:
    return _METHODS[type(request)]


def auth_to_pb(request: AuthRequest) -> Any:
    """The etcdserverpb request message of `request`."""
    if isinstance(request, AuthUserAddRequest):
        add = rpc_pb2.AuthUserAddRequest(name=request.name, password=request.password or "")
        if request.no_password:
            add.options.no_password = True
        return add
    if isinstance(request, AuthRoleGrantPermissionRequest):
        grant = rpc_pb2.AuthRoleGrantPermissionRequest(name=request.name)
        if request.perm is not None:
            grant.perm.CopyFrom(_perm_to_pb(request.perm))
        return grant
    if isinstance(request, AuthRoleRevokePermissionRequest):
        return rpc_pb2.AuthRoleRevokePermissionRequest(
            role=request.role, key=request.key, range_end=request.range_end
        )
    fields = {name: getattr(request, name) for name in type(request).__dataclass_fields__}
    if "password" in fields:
        fields["password"] = fields["password"] or ""
    return getattr(rpc_pb2, type(request).__name__)(**fields)


def _perm_to_pb(perm: Permission) -> Any:
    return auth_pb2.Permission(permType=perm.perm_type.name, key=perm.key, range_end=perm.range_end)


def token_of(message: Any) -> str:
    """The token of an AuthenticateResponse."""
    return str(message.token)


def auth_from_pb(request: AuthRequest, message: Any) -> AuthResponse:
    """The model response of `request` from the server's reply `message`."""
    header = ResponseHeader(int(message.header.revision))
    if isinstance(request, AuthStatusRequest):
        return AuthStatusResponse(header, bool(message.enabled), int(message.authRevision))
    if isinstance(request, AuthUserGetRequest):
        return AuthUserGetResponse(header, tuple(message.roles))
    if isinstance(request, AuthUserListRequest):
        return AuthUserListResponse(header, tuple(message.users))
    if isinstance(request, AuthRoleGetRequest):
        perms = tuple(
            Permission(PermType(p.permType), bytes(p.key), bytes(p.range_end)) for p in message.perm
        )
        return AuthRoleGetResponse(header, perms)
    if isinstance(request, AuthRoleListRequest):
        return AuthRoleListResponse(header, tuple(message.roles))
    method = {
        AuthEnableRequest: "auth_enable",
        AuthDisableRequest: "auth_disable",
        AuthenticateRequest: "authenticate",
        AuthUserAddRequest: "user_add",
        AuthUserDeleteRequest: "user_delete",
        AuthUserChangePasswordRequest: "user_passwd",
        AuthUserGrantRoleRequest: "user_grant_role",
        AuthUserRevokeRoleRequest: "user_revoke_role",
        AuthRoleAddRequest: "role_add",
        AuthRoleDeleteRequest: "role_delete",
        AuthRoleGrantPermissionRequest: "role_grant",
        AuthRoleRevokePermissionRequest: "role_revoke",
    }[type(request)]
    return AuthDoneResponse(header, method)
