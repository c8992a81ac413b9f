"""etcdspec: a specification, model, reference server and checker for etcd-like stores.

The root package holds what the four parts share: exit codes, three-valued verdicts,
the ITF trace writer and the command line (`etcdspec.cli`). The parts themselves live in
`etcdspec.spec`, `etcdspec.model`, `etcdspec.impl` and `etcdspec.checker`.
"""

__version__ = "0.1.0"
