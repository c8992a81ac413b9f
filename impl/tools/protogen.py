"""Regenerate the Python protobuf and gRPC modules in impl/pb from the .proto files.

Contract: the .proto files in impl/pb are the source of truth; the generated
`*_pb2.py`, `*_pb2.pyi` and `*_pb2_grpc.py` next to them are committed and must equal what
`generate()` writes (a test checks this). protoc runs on a staging tree in which the
protos sit under `etcdspec/impl/pb/`, so the generated modules import each other as
`from etcdspec.impl.pb import x_pb2` and register unique file names
(`etcdspec/impl/pb/rpc.proto`) in the protobuf descriptor pool.

Usage: `python -m etcdspec.impl.tools.protogen [OUT_DIR]` (default: impl/pb itself).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

PB_DIR = Path(__file__).resolve().parents[1] / "pb"
PACKAGE_PATH = Path("etcdspec") / "impl" / "pb"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


class ProtoGenError(RuntimeError):
    """protoc failed or is unavailable; the message carries protoc's own diagnostics."""


def proto_files(pb_dir: Path = PB_DIR) -> list[Path]:
    """The .proto sources, sorted by name."""
    return sorted(pb_dir.glob("*.proto"))


def generated_names(pb_dir: Path = PB_DIR) -> list[str]:
    """File names `generate()` produces for the protos in `pb_dir`, sorted."""
    return sorted(p.stem + suffix for p in proto_files(pb_dir) for suffix in GENERATED_SUFFIXES)


def generate(out_dir: Path, pb_dir: Path = PB_DIR) -> list[Path]:
    """Compile every .proto in `pb_dir` into `out_dir`; return the written files, sorted."""
    try:
        from grpc_tools import protoc
    except ImportError as exc:
        raise ProtoGenError(
            "grpc_tools is not installed: install the project's `test` extra "
            "(pip install -e '.[test]') to regenerate impl/pb"
        ) from exc
    sources = proto_files(pb_dir)
    if not sources:
        raise ProtoGenError(f"no .proto files in {pb_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="etcdspec-protogen-") as tmp:
        stage = Path(tmp) / "src"
        build = Path(tmp) / "out"
        (stage / PACKAGE_PATH).mkdir(parents=True)
        build.mkdir()
        for src in sources:
            shutil.copyfile(src, stage / PACKAGE_PATH / src.name)
        args = [
            "grpc_tools.protoc",
            f"-I{stage}",
            f"--python_out={build}",
            f"--pyi_out={build}",
            f"--grpc_python_out={build}",
            *[str(PACKAGE_PATH / src.name) for src in sources],
        ]
        # protoc resolves the relative proto names against the -I root.
        rc = _run_protoc(protoc.main, args, cwd=stage)
        if rc != 0:
            raise ProtoGenError(f"protoc exited with {rc} for {[s.name for s in sources]}")
        written = []
        for produced in sorted((build / PACKAGE_PATH).iterdir()):
            if produced.name.endswith(GENERATED_SUFFIXES):
                target = out_dir / produced.name
                shutil.copyfile(produced, target)
                written.append(target)
    return written


def _run_protoc(main: object, args: list[str], cwd: Path) -> int:
    import os

    previous = os.getcwd()
    os.chdir(cwd)
    try:
        assert callable(main)
        return int(main(args))
    finally:
        os.chdir(previous)


def cli(argv: list[str]) -> int:
    """Entry point: regenerate into argv[0] if given, else into impl/pb."""
    out_dir = Path(argv[0]) if argv else PB_DIR
    try:
        written = generate(out_dir)
    except ProtoGenError as exc:
        print(f"protogen: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
