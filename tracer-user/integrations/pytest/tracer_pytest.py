"""tracer test marks for pytest (docs/report.md, "Which test").

Loaded by `tracer record --tests` as a `pytest11` entry point: its
directory, on PYTHONPATH, holds this file and a `tracer_pytest.dist-info`
naming it, which pytest's plugin autoload finds. Never through
PYTEST_PLUGINS: a job that replaces PYTHONPATH would then fail pytest
("Error importing plugin"), where an entry point not found is no plugin,
and the suite runs as it would without tracer. By hand: `pytest -p
tracer_pytest` with this file's directory on PYTHONPATH, or
`pytest_plugins = ["tracer_pytest"]` in a conftest.py. pytest-xdist
workers inherit the environment and load it too.

Each phase of each test (setup, call, teardown) writes a begin and an end
mark: one write(2) to an fd that can never be open (above the kernel's
nr_open ceiling), so it fails with EBADF, here and always, and tracer's
write hook -- when tracer runs -- sees the bytes, the thread and the time.
Without tracer a mark costs one failing syscall. Nothing here may fail a
test: every error of a write is swallowed.
"""
import json
import os
import sys

import pytest

MARK_FD = 0x7FFFFFF0
PREFIX = b"tracer-test-mark/1 "
# What the kernel side keeps of a mark (tracer_common::MARK_LEN).
MAX = 512


def _encode(fields):
    return json.dumps(fields, separators=(",", ":")).encode("utf-8", "replace")


def _tail(nodeid):
    """What follows `"ev":…,"phase":…,` in every mark of one test, encoded
    once per test: the JSON encoding costs more than the mark's write.
    """
    # The name is the whole node id, as pytest prints it and as tracer
    # reads PYTEST_CURRENT_TEST: `tests/test_x.py::TestC::test_y[1]`; the
    # file is its part before the first `::` (none for an id without one).
    file, sep, _ = nodeid.partition("::")
    fields = {"runner": "pytest"}
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        fields["worker"] = worker
    if sep:
        fields["file"] = file
    fields["name"] = nodeid
    room = MAX - len(_head("begin", "teardown"))
    data = _encode(fields)[1:]
    if len(data) > room:
        # Cut the name, never the JSON (a cut object labels nothing): the
        # longest prefix that fits, found by halving (an escaped character
        # takes up to 12 bytes, so no count of characters says it).
        lo, hi = 0, len(nodeid)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            fields["name"] = nodeid[:mid]
            if len(_encode(fields)) - 1 <= room:
                lo = mid
            else:
                hi = mid - 1
        fields["name"] = nodeid[:lo]
        data = _encode(fields)[1:]
    return data


def _head(ev, phase):
    return PREFIX + b'{"ev":"' + ev.encode() + b'","phase":"' + phase.encode() + b'",'


def _payload(ev, tail, phase):
    return _head(ev, phase) + tail


def _mark(ev, tail, phase):
    try:
        os.write(MARK_FD, _payload(ev, tail, phase))
    except OSError:
        # EBADF, always: the fd is never open. The mark was seen (or not:
        # no tracer) all the same.
        pass


def _phase(item, phase):
    try:
        # Once per test, for its three phases.
        tail = getattr(item, "_tracer_pytest_tail", None)
        if tail is None:
            tail = _tail(item.nodeid)
            item._tracer_pytest_tail = tail
    except Exception:
        # A name that will not encode, or anything else: a missing label,
        # never a broken suite.
        yield
        return
    _mark("begin", tail, phase)
    try:
        yield
    finally:
        _mark("end", tail, phase)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    yield from _phase(item, "setup")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    yield from _phase(item, "call")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    yield from _phase(item, "teardown")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """One status mark per process: the plugin loaded, how, on which
    pytest (the report lists it; a pytest that ran without it is said)."""
    try:
        me = sys.modules.get(__name__)
        how = "-p, PYTEST_PLUGINS or conftest"
        if any(p is me for p, _ in config.pluginmanager.list_plugin_distinfo()):
            how = "pytest11 entry point"
        fields = {"ev": "status", "runner": "pytest", "version": pytest.__version__, "seam": how}
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if worker:
            fields["worker"] = worker
        os.write(MARK_FD, PREFIX + _encode(fields))
    except Exception:
        # EBADF, always; anything else: a missing line, never a failure.
        pass
