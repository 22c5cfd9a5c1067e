"""Shared test setup.

In CI (``CI`` set) a skipped test is a failure: every framework and service a test needs is
installed and started by ``.ci/run``. Only tests marked ``gpu`` may skip there (CI has none).
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    # The native venv's run (-m native) has only the native frameworks: a module that needs
    # the main venv's frameworks skips at import there, and its tests are not native ones
    # (native tests import their framework inside the test, never at module level).
    native_run = collector.config.getoption("markexpr", "") == "native"
    if report.skipped and os.environ.get("CI") and not native_run:
        report.outcome = "failed"
        report.longrepr = f"skipped at import in CI, where nothing may be: {report.longrepr}"


@pytest.fixture
def in_tmp_path(tmp_path, monkeypatch) -> Path:
    """``tmp_path``, made the current folder: batchspec runs there, as a job runs from its own."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def fake_sinfo(tmp_path, monkeypatch):
    """A ``sinfo`` that reports 64-core nodes with 8 GPUs (the dry run asks it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sinfo = bin_dir / "sinfo"
    sinfo.write_text("#!/bin/sh\necho '64 gpu:h100:8(S:0-1)'\n")
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


#: Node states in which the local cluster takes jobs (a busy node queues them).
_USABLE = ("idle", "mixed", "allocated", "completing")


def _slurm_state() -> tuple[bool, str]:
    """Whether ``sinfo`` answers with a node that takes jobs, and what it said."""
    if shutil.which("sinfo") is None:
        return False, "sinfo is not installed"
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return False, "sinfo did not answer in 30 s"
    said = (done.stdout + done.stderr).strip() or f"exit {done.returncode}"
    states = done.stdout.split()
    return done.returncode == 0 and any(s in _USABLE for s in states), said


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """The local one-node Slurm cluster, taking jobs. Where ``scripts/local-slurm.sh`` can
    (root, Debian), a cluster that went down (a daemon gone, the node drained) is started again
    first; a test without one skips, saying what ``sinfo`` said (in CI that fails, so the
    reason is in the report)."""
    up, said = _slurm_state()
    if not up and os.geteuid() == 0 and shutil.which("apt-get"):
        started = subprocess.run(
            ["bash", str(ROOT / "scripts" / "local-slurm.sh"), "start"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if started.returncode == 0:
            # Its last line is `export SLURM_CONF=...`: the config the restarted daemons read.
            line = started.stdout.strip().splitlines()[-1]
            os.environ["SLURM_CONF"] = line.split("=", 1)[1].strip("'\"")
        up, again = _slurm_state()
        said = f"{said}; after scripts/local-slurm.sh start: {again} {started.stderr[-400:]}"
    if not up:
        pytest.skip(f"no Slurm cluster (scripts/local-slurm.sh start): {said}")


def pytest_collection_modifyitems(config, items):
    """Under ``pytest -n`` (xdist, as CI runs it) the tests that use the one-node Slurm cluster
    run on one worker, one after another: its jobs share the node's CPUs and the rendezvous
    port (29500), so two at once would queue behind each other or collide. They are collected
    first, so that their worker starts on them while the others share out the rest, instead
    of running them alone at the end."""
    slurm = [item for item in items if "slurm_cluster" in getattr(item, "fixturenames", ())]
    for item in slurm:
        item.add_marker(pytest.mark.xdist_group("slurm"))
    items[:] = slurm + [item for item in items if item not in slurm]
