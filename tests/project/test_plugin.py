"""Frameworks are plugins: the registry derives every list from them, and a package installed
from outside the project (examples/plugin, nanoGPT's configs) is used by render, inspect and
validate like a built-in one."""

import dataclasses
import json
import os
import subprocess
import sys
import tomllib
import types

import pytest
from click.testing import CliRunner
from paths import ROOT

from translator.cli import main
from translator.job.script import read_job
from translator.plugin import registry as frameworks
from translator.shell.launchers import LAUNCHERS, LauncherDefinition
from translator.words.errors import InputError


def test_the_built_in_frameworks_meet_the_contract():
    """They are registered as a plugin is, by the entry points of batchspec's own pyproject."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    builtin = declared[frameworks.GROUP]
    folder = ROOT / "translator" / "frameworks"
    packages = {p.parent.name for p in folder.glob("*/__init__.py")} - {"shared"}
    assert {name.replace("-", "_") for name in builtin} == packages
    assert set(builtin) <= set(frameworks.names())
    for name, target in builtin.items():
        framework = frameworks.get(name)
        assert isinstance(framework, frameworks.Framework) and framework.name == name
        assert target == f"translator.frameworks.{name.replace('-', '_')}:FRAMEWORK"


class FakePoint:
    def __init__(self, name, obj):
        self.name, self.value, self.obj, self.dist = name, f"fake:{name}", obj, None

    def load(self):
        if isinstance(self.obj, Exception):
            raise self.obj
        return self.obj


@pytest.fixture
def plugins(monkeypatch):
    """Entry points as a test wants them (and a registry that forgets them afterwards)."""

    real = frameworks._points()

    def install(**points):
        fakes = [FakePoint(n, o) for n, o in points.items()]
        monkeypatch.setattr(frameworks, "_points", lambda: real + fakes)
        frameworks._entry_points.cache_clear()
        frameworks.get.cache_clear()

    yield install
    frameworks._entry_points.cache_clear()
    frameworks.get.cache_clear()


def test_a_plugin_that_lacks_part_of_the_contract_is_refused_by_name(plugins):
    half = types.SimpleNamespace(NAME="half", TEMPLATE="x", FILENAME="x", read=lambda t, w: None)
    plugins(half=half, broken=ImportError("no module named torchtune"))
    assert frameworks.names()[-2:] == ("broken", "half")
    with pytest.raises(InputError, match="'half' .* lacks EXTENSIONS, check, claims, context"):
        frameworks.get("half")
    with pytest.raises(InputError, match="'broken' .* does not load: ImportError"):
        frameworks.get("broken")
    with pytest.raises(InputError, match="unknown framework 'nope'"):
        frameworks.get("nope")


def test_names_need_no_import(plugins):
    """The command line lists a plugin without importing it (plan stays fast)."""
    plugins(lazy=RuntimeError("imported too early"))
    assert "lazy" in frameworks.names()
    assert "deepspeed" in frameworks.names()


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh virtual environment with batchspec and the example plugin installed."""
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = subprocess.run(
        [
            str(folder / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            str(ROOT),
            str(ROOT / "examples" / "plugin"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return folder


def batchspec(venv, *args, cwd):
    return subprocess.run(
        [str(venv / "bin" / "batchspec"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )


def test_the_example_plugin_works_from_a_fresh_environment(venv, tmp_path):
    (tmp_path / "spec.yaml").write_text(
        "global_batch_size: 480\nmicro_batch_size: 12\nworld_size: 8\nsequence_length: 1024\n"
    )
    done = batchspec(
        venv, "render", "spec.yaml", "--to", "nanogpt,deepspeed", "--out", "out", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out" / "nanogpt_config.py").read_text()
    assert "batch_size = 12\ngradient_accumulation_steps = 40\nblock_size = 1024\n" in text

    done = batchspec(
        venv, "inspect", "out/nanogpt_config.py", "--world-size", 8, "--json", cwd=tmp_path
    )
    out = json.loads(done.stdout)
    assert done.returncode == 0 and out["framework"] == "nanogpt"
    assert (out["global_batch_size"], out["gradient_accumulation_steps"]) == (480, 5)

    # nanoGPT's own rule, from the plugin: 40 micro-batches do not split over 6 processes
    done = batchspec(venv, "validate", "out/nanogpt_config.py", "--world-size", 6, cwd=tmp_path)
    assert done.returncode == 1
    assert "out/nanogpt_config.py:4" in done.stdout and "does not divide by 6" in done.stdout

    done = batchspec(venv, "inspect", "--help", cwd=tmp_path)
    assert "|megatron|" in done.stdout and "|nanogpt]" in done.stdout


def test_without_the_plugin_the_name_is_unknown(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("global_batch_size: 16\nmicro_batch_size: 2\nworld_size: 8\n")
    result = CliRunner().invoke(
        main, ["render", str(spec), "--to", "nanogpt", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 2 and "unknown framework nanogpt" in result.stderr


def test_a_plugin_brings_a_launcher_that_sizes_the_jobs_it_starts(plugins, tmp_path):
    """A framework contributes its launchers as it contributes its reader: a launch line that
    starts a program with the plugin's launcher is sized by that launcher's flags; without the
    plugin the launcher is unknown, and so is the world."""
    job = tmp_path / "job.sh"
    job.write_text(
        "#!/bin/bash\nmylaunch --procs 4 train.py --per_device_train_batch_size 2 "
        "--gradient_accumulation_steps 2\n"
    )
    before = read_job(job.read_text(), str(job))[1]
    assert before.launcher is None and before.world_size is None
    brought = LauncherDefinition("mylaunch", total=("--procs",))
    plugins(
        mine=dataclasses.replace(frameworks.get("deepspeed"), name="mine", launchers=(brought,))
    )
    assert list(frameworks.launchers())[: len(LAUNCHERS)] == list(LAUNCHERS)  # generic first
    after = read_job(job.read_text(), str(job))[1]
    assert (after.launcher, after.world_size) == ("mylaunch", 4)


def test_every_built_in_wires_each_contract_function_its_modules_define():
    """A built-in framework is constructed explicitly: a function its rules module defines
    under a contract field's name (``launch_edits``) and that is not wired would silently do
    nothing. (Frameworks whose rules live in ``shared/`` are checked through that module.)"""
    import importlib

    from translator.plugin.contract import _MODULE_FUNCTIONS
    from translator.plugin.registry import FRAMEWORKS

    unwired = []
    for name, framework in FRAMEWORKS.items():
        package = framework.read.__module__.rsplit(".", 1)[0]
        if not package.startswith("translator.frameworks."):
            continue  # a plugin's
        if package.endswith(".shared"):  # the HF Trainer's rules: its own folder's modules
            package = f"translator.frameworks.{name}"
        for module_name in ("rules", "program", "verdict"):
            try:
                module = importlib.import_module(f"{package}.{module_name}")
            except ModuleNotFoundError:
                continue
            for field in _MODULE_FUNCTIONS:
                if callable(getattr(module, field, None)) and getattr(framework, field) is None:
                    unwired.append(f"{name}: {module_name}.{field}")
        try:  # a launcher definition of its own is brought to the registry
            launcher = importlib.import_module(f"{package}.launcher").LAUNCHER
        except ModuleNotFoundError:
            continue
        if launcher not in framework.launchers:
            unwired.append(f"{name}: launcher.LAUNCHER")
    assert len(FRAMEWORKS) >= 11
    assert not unwired
