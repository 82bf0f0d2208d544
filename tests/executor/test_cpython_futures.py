"""CPython's own tests of ``Future``, ``wait`` and ``as_completed`` (test_concurrent_futures), every one run
against toolfork's futures: see tests/executor/cpython_futures (where they come from for this interpreter,
and the one way they are adapted)."""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Iterator

import pytest

from tests.executor.cpython_futures.loader import adapted, sources

SOURCES = sources()
CLASSES = {name: cls for source in SOURCES for name, cls in adapted(source).items()}
globals().update(CLASSES)  # unittest classes: pytest collects them here


class _LastResort(logging.Handler):
    """What logging does for a program that configured none: the record on the current ``sys.stderr``."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(self.format(record) + "\n")


@pytest.fixture(autouse=True)
def unconfigured_logging() -> Iterator[None]:
    """CPython's suite runs with no logging configured: a callback's exception reaches stderr through
    logging's last resort. Under pytest the root logger has pytest's handlers, so the futures' logger gets
    the last resort's behaviour back here (the environment, not an assertion, is what is adapted)."""
    logger = logging.getLogger("concurrent.futures")
    handler = _LastResort()
    propagate, logger.propagate = logger.propagate, False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


@pytest.fixture(autouse=True)
def heap_of_earlier_tests_frozen() -> Iterator[None]:
    """Some of these tests collect garbage a dozen times (``support.gc_collect``) to prove a future is
    freed; in an xdist worker that ran hundreds of tests before, each full collection walks that whole
    heap (48 s for one test beside two busy loops). The objects that were there before the test are
    moved out of the collector's way (``gc.freeze``); everything the test makes is collected as ever."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_every_class_is_found() -> None:
    assert {"v310", "v313"} <= set(SOURCES)
    for source in SOURCES:
        suffix = source.capitalize()
        wanted = {f"FutureTests{suffix}", f"ToolforkWaitTests{suffix}", f"ToolforkAsCompletedTests{suffix}"}
        assert wanted <= set(CLASSES), source
