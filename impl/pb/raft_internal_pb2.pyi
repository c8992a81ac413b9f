from etcdspec.impl.pb import rpc_pb2 as _rpc_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RequestHeader(_message.Message):
    __slots__ = ("ID", "member_id", "username", "auth_revision", "as_member")
    ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    AUTH_REVISION_FIELD_NUMBER: _ClassVar[int]
    AS_MEMBER_FIELD_NUMBER: _ClassVar[int]
    ID: int
    member_id: int
    username: str
    auth_revision: int
    as_member: bool
    def __init__(self, ID: _Optional[int] = ..., member_id: _Optional[int] = ..., username: _Optional[str] = ..., auth_revision: _Optional[int] = ..., as_member: _Optional[bool] = ...) -> None: ...

class InternalAuthenticateRequest(_message.Message):
    __slots__ = ("name", "password", "simple_token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    SIMPLE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    password: str
    simple_token: str
    def __init__(self, name: _Optional[str] = ..., password: _Optional[str] = ..., simple_token: _Optional[str] = ...) -> None: ...

class MemberAttributes(_message.Message):
    __slots__ = ("name", "client_urls")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_URLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    client_urls: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., client_urls: _Optional[_Iterable[str]] = ...) -> None: ...

class ClusterMemberAttrSetRequest(_message.Message):
    __slots__ = ("member_ID", "member_attributes")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    member_ID: int
    member_attributes: MemberAttributes
    def __init__(self, member_ID: _Optional[int] = ..., member_attributes: _Optional[_Union[MemberAttributes, _Mapping]] = ...) -> None: ...

class InternalRaftRequest(_message.Message):
    __slots__ = ("header", "range", "put", "delete_range", "txn", "compaction", "lease_grant", "lease_revoke", "alarm", "auth_enable", "auth_disable", "authenticate", "auth_status", "auth_user_add", "auth_user_delete", "auth_user_get", "auth_user_change_password", "auth_user_grant_role", "auth_user_revoke_role", "auth_user_list", "auth_role_list", "auth_role_add", "auth_role_delete", "auth_role_get", "auth_role_grant_permission", "auth_role_revoke_permission", "cluster_member_attr_set")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    DELETE_RANGE_FIELD_NUMBER: _ClassVar[int]
    TXN_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    LEASE_GRANT_FIELD_NUMBER: _ClassVar[int]
    LEASE_REVOKE_FIELD_NUMBER: _ClassVar[int]
    ALARM_FIELD_NUMBER: _ClassVar[int]
    AUTH_ENABLE_FIELD_NUMBER: _ClassVar[int]
    AUTH_DISABLE_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATE_FIELD_NUMBER: _ClassVar[int]
    AUTH_STATUS_FIELD_NUMBER: _ClassVar[int]
    AUTH_USER_ADD_FIELD_NUMBER: _ClassVar[int]
    AUTH_USER_DELETE_FIELD_NUMBER: _ClassVar[int]
    AUTH_USER_GET_FIELD_NUMBER: _ClassVar[int]
    AUTH_USER_CHANGE_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    AUTH_USER_GRANT_ROLE_FIELD_NUMBER: _ClassVar[int]
    AUTH_USER_REVOKE_ROLE_FIELD_NUMBER: _ClassVar[int]
    AUTH_USER_LIST_FIELD_NUMBER: _ClassVar[int]
    AUTH_ROLE_LIST_FIELD_NUMBER: _ClassVar[int]
    AUTH_ROLE_ADD_FIELD_NUMBER: _ClassVar[int]
    AUTH_ROLE_DELETE_FIELD_NUMBER: _ClassVar[int]
    AUTH_ROLE_GET_FIELD_NUMBER: _ClassVar[int]
    AUTH_ROLE_GRANT_PERMISSION_FIELD_NUMBER: _ClassVar[int]
    AUTH_ROLE_REVOKE_PERMISSION_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_MEMBER_ATTR_SET_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    range: _rpc_pb2.RangeRequest
    put: _rpc_pb2.PutRequest
    delete_range: _rpc_pb2.DeleteRangeRequest
    txn: _rpc_pb2.TxnRequest
    compaction: _rpc_pb2.CompactionRequest
    lease_grant: _rpc_pb2.LeaseGrantRequest
    lease_revoke: _rpc_pb2.LeaseRevokeRequest
    alarm: _rpc_pb2.AlarmRequest
    auth_enable: _rpc_pb2.AuthEnableRequest
    auth_disable: _rpc_pb2.AuthDisableRequest
    authenticate: InternalAuthenticateRequest
    auth_status: _rpc_pb2.AuthStatusRequest
    auth_user_add: _rpc_pb2.AuthUserAddRequest
    auth_user_delete: _rpc_pb2.AuthUserDeleteRequest
    auth_user_get: _rpc_pb2.AuthUserGetRequest
    auth_user_change_password: _rpc_pb2.AuthUserChangePasswordRequest
    auth_user_grant_role: _rpc_pb2.AuthUserGrantRoleRequest
    auth_user_revoke_role: _rpc_pb2.AuthUserRevokeRoleRequest
    auth_user_list: _rpc_pb2.AuthUserListRequest
    auth_role_list: _rpc_pb2.AuthRoleListRequest
    auth_role_add: _rpc_pb2.AuthRoleAddRequest
    auth_role_delete: _rpc_pb2.AuthRoleDeleteRequest
    auth_role_get: _rpc_pb2.AuthRoleGetRequest
    auth_role_grant_permission: _rpc_pb2.AuthRoleGrantPermissionRequest
    auth_role_revoke_permission: _rpc_pb2.AuthRoleRevokePermissionRequest
    cluster_member_attr_set: ClusterMemberAttrSetRequest
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., range: _Optional[_Union[_rpc_pb2.RangeRequest, _Mapping]] = ..., put: _Optional[_Union[_rpc_pb2.PutRequest, _Mapping]] = ..., delete_range: _Optional[_Union[_rpc_pb2.DeleteRangeRequest, _Mapping]] = ..., txn: _Optional[_Union[_rpc_pb2.TxnRequest, _Mapping]] = ..., compaction: _Optional[_Union[_rpc_pb2.CompactionRequest, _Mapping]] = ..., lease_grant: _Optional[_Union[_rpc_pb2.LeaseGrantRequest, _Mapping]] = ..., lease_revoke: _Optional[_Union[_rpc_pb2.LeaseRevokeRequest, _Mapping]] = ..., alarm: _Optional[_Union[_rpc_pb2.AlarmRequest, _Mapping]] = ..., auth_enable: _Optional[_Union[_rpc_pb2.AuthEnableRequest, _Mapping]] = ..., auth_disable: _Optional[_Union[_rpc_pb2.AuthDisableRequest, _Mapping]] = ..., authenticate: _Optional[_Union[InternalAuthenticateRequest, _Mapping]] = ..., auth_status: _Optional[_Union[_rpc_pb2.AuthStatusRequest, _Mapping]] = ..., auth_user_add: _Optional[_Union[_rpc_pb2.AuthUserAddRequest, _Mapping]] = ..., auth_user_delete: _Optional[_Union[_rpc_pb2.AuthUserDeleteRequest, _Mapping]] = ..., auth_user_get: _Optional[_Union[_rpc_pb2.AuthUserGetRequest, _Mapping]] = ..., auth_user_change_password: _Optional[_Union[_rpc_pb2.AuthUserChangePasswordRequest, _Mapping]] = ..., auth_user_grant_role: _Optional[_Union[_rpc_pb2.AuthUserGrantRoleRequest, _Mapping]] = ..., auth_user_revoke_role: _Optional[_Union[_rpc_pb2.AuthUserRevokeRoleRequest, _Mapping]] = ..., auth_user_list: _Optional[_Union[_rpc_pb2.AuthUserListRequest, _Mapping]] = ..., auth_role_list: _Optional[_Union[_rpc_pb2.AuthRoleListRequest, _Mapping]] = ..., auth_role_add: _Optional[_Union[_rpc_pb2.AuthRoleAddRequest, _Mapping]] = ..., auth_role_delete: _Optional[_Union[_rpc_pb2.AuthRoleDeleteRequest, _Mapping]] = ..., auth_role_get: _Optional[_Union[_rpc_pb2.AuthRoleGetRequest, _Mapping]] = ..., auth_role_grant_permission: _Optional[_Union[_rpc_pb2.AuthRoleGrantPermissionRequest, _Mapping]] = ..., auth_role_revoke_permission: _Optional[_Union[_rpc_pb2.AuthRoleRevokePermissionRequest, _Mapping]] = ..., cluster_member_attr_set: _Optional[_Union[ClusterMemberAttrSetRequest, _Mapping]] = ...) -> None: ...
