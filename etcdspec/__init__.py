"""etcdspec: a specification, model, reference server and checker for etcd-like stores.

This folder is the shared base every part may use and that uses none of them: exit
codes, three-valued verdicts, the ITF trace writer, the contract of a `verify` stage and
the Hypothesis profiles. The parts live in `etcdspec.spec`, `etcdspec.model`,
`etcdspec.impl`, `etcdspec.checker` and `etcdspec.conform`, the command line over them
in `etcdspec.cli` (each mapped from a top-level folder of its own: docs/ARCHITECTURE.md).
"""

__version__ = "0.1.0"
