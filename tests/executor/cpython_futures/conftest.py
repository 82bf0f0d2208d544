"""The vendored CPython modules are collected only through tests/executor/test_cpython_futures.py, adapted
(here, as they are, they would test the standard library's own executors)."""

collect_ignore_glob = ["v3*/*.py"]
