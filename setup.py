"""The compiled search core (checker/_wgl.c) and the history reader's plain loop
(checker/_histread.c), built with the package: everything else is declared in
pyproject.toml. Without a C compiler the build fails loudly; the checker's
pure-Python search stays the fallback when the module is absent (checker/compiled_search.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "etcdspec.checker._wgl",
            ["checker/_wgl.c"],
            extra_compile_args=["-O2", "-std=c11"],
        ),
        Extension(
            "etcdspec.checker._histread",
            ["checker/_histread.c"],
            extra_compile_args=["-O2", "-std=c11"],
        ),
    ]
)
