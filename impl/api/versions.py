"""The versions this server reports: etcd's, of the API it serves (Maintenance.Status,
the snapshot stream)."""

SERVER_VERSION = "3.5.0"
STORAGE_VERSION = "3.5.0"
