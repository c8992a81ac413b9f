"""The header list of a well-formed gRPC request, as both HTTP/2 test files send it."""

from __future__ import annotations

GRPC_REQUEST = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/etcdserverpb.KV/Range"),
    (":authority", "127.0.0.1"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]
