"""The versions this server reports, all saying which etcd API it implements: etcd's
v3 API as of etcd 3.5 (etcd_api.METHODS lists it; README says which methods are served).

They are not our own release number. Status.version is what etcd reports as its server
version and clients read as semver, so it is the API version with patch 0; the storage
version (Status, the snapshot stream) and the cluster version written into snapshots
(impl/kv/etcd_export.py, a layer below this one) are etcd 3.5's, whose formats we read
and write.
"""

API_VERSION = "3.5"
"""The etcd API version implemented (etcd's version.APIVersion: major.minor)."""

SERVER_VERSION = f"{API_VERSION}.0"
STORAGE_VERSION = f"{API_VERSION}.0"
