"""Shared test setup.

In CI (``CI`` set) a skipped test is a failure: every framework and service a test needs is
installed and started by ``.ci/run``. Only tests marked ``gpu`` may skip there (CI has none).
"""

import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; the one kind of test CI may skip")
    # Quiet, offline frameworks: nothing may be downloaded at test time.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("AXOLOTL_DO_NOT_TRACK", "1")
    os.environ.setdefault("DS_ACCELERATOR", "cpu")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and item.get_closest_marker("gpu") is None:
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may be: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A test file that skips at import (``pytest.importorskip`` at module level) fails in CI
    too: otherwise the no-skip rule above would never see its tests."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI"):
        report.outcome = "failed"
        report.longrepr = f"skipped at import in CI, where nothing may be: {report.longrepr}"


@pytest.fixture
def fake_sinfo(tmp_path, monkeypatch):
    """A ``sinfo`` that reports 64-core nodes with 8 GPUs (the dry run asks it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sinfo = bin_dir / "sinfo"
    sinfo.write_text("#!/bin/sh\necho '64 gpu:h100:8(S:0-1)'\n")
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
