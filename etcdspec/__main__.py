"""`python -m etcdspec` runs the command line."""

from etcdspec.cli.main import main

main()
