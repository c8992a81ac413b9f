"""The `etcdspec` command line: one program, one thin module per verb.

Each verb module defines a click command of the verb's name and calls a library
function that the tests use directly; no core library imports click.
"""
