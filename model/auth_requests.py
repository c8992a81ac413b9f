"""The auth store's vocabulary in the model: permissions, auth requests and responses.

Contract: frozen, hashable dataclasses named after etcdserverpb's Auth* messages and
authpb.Permission, each with `describe()` (the one canonical text). Names and passwords
are `str` (etcd's protobuf `string`), keys and range ends `bytes`. The model keeps
passwords as given: it is an oracle, not a server, and never stores them anywhere but in
its own state. Which requests exist and what they answer is etcd 3.5's; what they do is
model/auth.py's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

from etcdspec.model.requests import ResponseHeader, show_range


class PermType(enum.Enum):
    """authpb.Permission.Type."""

    READ = 0
    WRITE = 1
    READWRITE = 2

    def grants(self, wanted: PermType) -> bool:
        """Whether a permission of this type grants `wanted` (READ or WRITE)."""
        return self is PermType.READWRITE or self is wanted


@dataclass(frozen=True, slots=True)
class Permission:
    """authpb.Permission: a type over one key (range_end b""), a range [key, range_end),
    or every key from `key` on (range_end b"\\x00")."""

    perm_type: PermType
    key: bytes
    range_end: bytes = b""

    def describe(self) -> str:
        return f"{self.perm_type.name} {show_range(self.key, self.range_end)}"


# ---------------------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class AuthEnableRequest:
    def describe(self) -> str:
        return "auth_enable()"


@dataclass(frozen=True, slots=True)
class AuthDisableRequest:
    def describe(self) -> str:
        return "auth_disable()"


@dataclass(frozen=True, slots=True)
class AuthStatusRequest:
    def describe(self) -> str:
        return "auth_status()"


@dataclass(frozen=True, slots=True)
class AuthenticateRequest:
    """Authenticate: a name and password checked; the model issues no token (who holds
    one is what `AsUser` says). password None: not recorded (any password is taken)."""

    name: str
    password: str | None = None

    def describe(self) -> str:
        return f"authenticate({self.name})"


@dataclass(frozen=True, slots=True)
class AuthUserAddRequest:
    """password None: not recorded (a history keeps no secrets); Authenticate then
    takes any password for this user."""

    name: str
    password: str | None = ""
    no_password: bool = False

    def describe(self) -> str:
        extra = ", no_password" if self.no_password else ""
        return f"user_add({self.name}{extra})"


@dataclass(frozen=True, slots=True)
class AuthUserGetRequest:
    name: str

    def describe(self) -> str:
        return f"user_get({self.name})"


@dataclass(frozen=True, slots=True)
class AuthUserListRequest:
    def describe(self) -> str:
        return "user_list()"


@dataclass(frozen=True, slots=True)
class AuthUserDeleteRequest:
    name: str

    def describe(self) -> str:
        return f"user_delete({self.name})"


@dataclass(frozen=True, slots=True)
class AuthUserChangePasswordRequest:
    name: str
    password: str | None = None

    def describe(self) -> str:
        return f"user_passwd({self.name})"


@dataclass(frozen=True, slots=True)
class AuthUserGrantRoleRequest:
    user: str
    role: str

    def describe(self) -> str:
        return f"user_grant_role({self.user}, {self.role})"


@dataclass(frozen=True, slots=True)
class AuthUserRevokeRoleRequest:
    name: str
    role: str

    def describe(self) -> str:
        return f"user_revoke_role({self.name}, {self.role})"


@dataclass(frozen=True, slots=True)
class AuthRoleAddRequest:
    name: str

    def describe(self) -> str:
        return f"role_add({self.name})"


@dataclass(frozen=True, slots=True)
class AuthRoleGetRequest:
    role: str

    def describe(self) -> str:
        return f"role_get({self.role})"


@dataclass(frozen=True, slots=True)
class AuthRoleListRequest:
    def describe(self) -> str:
        return "role_list()"


@dataclass(frozen=True, slots=True)
class AuthRoleDeleteRequest:
    role: str

    def describe(self) -> str:
        return f"role_delete({self.role})"


@dataclass(frozen=True, slots=True)
class AuthRoleGrantPermissionRequest:
    """perm None is a request without a permission (etcd: permission not given)."""

    name: str
    perm: Permission | None

    def describe(self) -> str:
        perm = "-" if self.perm is None else self.perm.describe()
        return f"role_grant({self.name}, {perm})"


@dataclass(frozen=True, slots=True)
class AuthRoleRevokePermissionRequest:
    role: str
    key: bytes
    range_end: bytes = b""

    def describe(self) -> str:
        return f"role_revoke({self.role}, {show_range(self.key, self.range_end)})"


AuthRequest: TypeAlias = (
    AuthEnableRequest
    | AuthDisableRequest
    | AuthStatusRequest
    | AuthenticateRequest
    | AuthUserAddRequest
    | AuthUserGetRequest
    | AuthUserListRequest
    | AuthUserDeleteRequest
    | AuthUserChangePasswordRequest
    | AuthUserGrantRoleRequest
    | AuthUserRevokeRoleRequest
    | AuthRoleAddRequest
    | AuthRoleGetRequest
    | AuthRoleListRequest
    | AuthRoleDeleteRequest
    | AuthRoleGrantPermissionRequest
    | AuthRoleRevokePermissionRequest
)

AUTH_REQUEST_TYPES: tuple[type, ...] = (
    AuthEnableRequest,
    AuthDisableRequest,
    AuthStatusRequest,
    AuthenticateRequest,
    AuthUserAddRequest,
    AuthUserGetRequest,
    AuthUserListRequest,
    AuthUserDeleteRequest,
    AuthUserChangePasswordRequest,
    AuthUserGrantRoleRequest,
    AuthUserRevokeRoleRequest,
    AuthRoleAddRequest,
    AuthRoleGetRequest,
    AuthRoleListRequest,
    AuthRoleDeleteRequest,
    AuthRoleGrantPermissionRequest,
    AuthRoleRevokePermissionRequest,
)
"""Every auth request class (for isinstance dispatch)."""

AUTH_READ_TYPES: tuple[type, ...] = (
    AuthStatusRequest,
    AuthUserGetRequest,
    AuthUserListRequest,
    AuthRoleGetRequest,
    AuthRoleListRequest,
)
"""Auth requests that never change the auth store."""

# ---------------------------------------------------------------------------- responses


@dataclass(frozen=True, slots=True)
class AuthDoneResponse:
    """The empty response of an auth change (AuthEnable, UserAdd, RoleGrantPermission,
    ...) or of Authenticate (whose token the model does not issue); `method` names it."""

    header: ResponseHeader
    method: str

    def describe(self) -> str:
        return f"{self.method}-> ok"


@dataclass(frozen=True, slots=True)
class AuthStatusResponse:
    header: ResponseHeader
    enabled: bool
    auth_revision: int

    def describe(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        return f"auth_status-> {state} auth_revision {self.auth_revision}"


@dataclass(frozen=True, slots=True)
class AuthUserGetResponse:
    header: ResponseHeader
    roles: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"user_get-> roles [{', '.join(self.roles)}]"


@dataclass(frozen=True, slots=True)
class AuthUserListResponse:
    header: ResponseHeader
    users: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"user_list-> [{', '.join(self.users)}]"


@dataclass(frozen=True, slots=True)
class AuthRoleGetResponse:
    header: ResponseHeader
    perm: tuple[Permission, ...] = ()

    def describe(self) -> str:
        return f"role_get-> [{', '.join(p.describe() for p in self.perm)}]"


@dataclass(frozen=True, slots=True)
class AuthRoleListResponse:
    header: ResponseHeader
    roles: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"role_list-> [{', '.join(self.roles)}]"


AuthResponse: TypeAlias = (
    AuthDoneResponse
    | AuthStatusResponse
    | AuthUserGetResponse
    | AuthUserListResponse
    | AuthRoleGetResponse
    | AuthRoleListResponse
)
