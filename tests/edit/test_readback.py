"""Every rendered file reads back, through the command line, as the framework it was rendered
for, and our own ``validate`` finds nothing above info in it: ``render`` writes no file that
``validate`` then warns about, and no file that detection gives to another framework."""

from __future__ import annotations

import json

import pytest
import yaml
from run_batchspec import run, run_json

from translator.frameworks import FRAMEWORKS
from translator.spec import BatchSpec

#: Specs in the shapes people render: plain data parallel, several nodes with a sequence
#: length, tensor and context parallel, pipeline parallel, ZeRO and DeepSpeed's AutoTP.
SPECS = {
    "dp": {"global_batch_size": 64, "micro_batch_size": 2, "world_size": 8},
    "nodes": {
        "global_batch_size": 256,
        "micro_batch_size": 4,
        "nodes": 2,
        "gpus_per_node": 8,
        "sequence_length": 4096,
    },
    "tp-cp": {
        "global_batch_size": 32,
        "micro_batch_size": 1,
        "world_size": 16,
        "tensor_parallel_size": 2,
        "context_parallel_size": 2,
    },
    "pp": {
        "global_batch_size": 128,
        "micro_batch_size": 2,
        "world_size": 16,
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 2,
    },
    "zero3": {"global_batch_size": 96, "micro_batch_size": 3, "world_size": 4, "zero_stage": 3},
    "autotp": {
        "global_batch_size": 64,
        "micro_batch_size": 2,
        "world_size": 8,
        "tensor_parallel_size": 2,
        "deepspeed_autotp": True,
    },
}


def launch_flags(spec: BatchSpec) -> list[str]:
    """The launch a rendered file is for, as ``validate`` takes it."""
    flags = ["--world-size", str(spec.world)]
    for flag, size in (
        ("--tp", spec.tensor_parallel_size),
        ("--pp", spec.pipeline_parallel_size),
        ("--cp", spec.context_parallel_size),
    ):
        if size > 1:
            flags += [flag, str(size)]
    return flags


def above_info(out: dict) -> list[str]:
    return [
        f"{f['severity']} {f['code']}: {f['message']}"
        for f in out["findings"]
        if f["severity"] != "info"
    ]


def rendered_cases():
    """``(spec name, framework)`` for each framework that takes the spec (the HF Trainer's file
    cannot carry TP/CP sizes, Axolotl has no pipeline parallelism: they refuse those)."""
    for name, fields in SPECS.items():
        spec = BatchSpec(**fields)
        for framework in FRAMEWORKS.values():
            if not any(f.severity == "error" for f in framework.check(spec)):
                yield pytest.param(name, framework.name, id=f"{name}-{framework.name}")


@pytest.mark.parametrize("name, framework", list(rendered_cases()))
def test_every_rendered_file_validates_as_its_framework(tmp_path, name, framework):
    spec = BatchSpec(**SPECS[name])
    (tmp_path / "spec.json").write_text(json.dumps(SPECS[name]))
    rendered, _ = run_json("render", tmp_path / "spec.json", "--to", framework, "--out", tmp_path)
    assert rendered.exit_code == 0
    path = tmp_path / FRAMEWORKS[framework].filename
    result, out = run_json("validate", path, *launch_flags(spec))
    (file,) = out["files"]
    assert (result.exit_code, file["framework"], above_info(file)) == (0, framework, [])


def test_every_framework_is_rendered_for_some_spec():
    assert {p.values[1] for p in rendered_cases()} == set(FRAMEWORKS)


@pytest.mark.parametrize("name", ["dp", "nodes", "tp-cp", "zero3"])
def test_a_rendered_accelerate_config_validates_alone(tmp_path, name):
    """It carries its own world (num_processes), so ``validate`` needs no flag for it, and it
    sets nothing the spec did not ask for: no mixed precision, no machine rank, and no DeepSpeed
    accumulation (accelerate would export it over the training config's own)."""
    (tmp_path / "spec.json").write_text(json.dumps(SPECS[name]))
    run_json("render", tmp_path / "spec.json", "--to", "accelerate", "--out", tmp_path)
    config = yaml.safe_load((tmp_path / "accelerate.yaml").read_text())
    assert not {"mixed_precision", "machine_rank"} & set(config)
    assert "gradient_accumulation_steps" not in (config.get("deepspeed_config") or {})
    result, out = run_json("validate", tmp_path / "accelerate.yaml")
    (file,) = out["files"]
    assert (result.exit_code, file["framework"], above_info(file)) == (0, "accelerate", [])


def test_a_yaml_no_framework_claims_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "foo.yaml"
    path.write_text("foo: 1\n")
    result = run("validate", path)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"batchspec: error: {path}: cannot tell which framework this config is for; give "
        f"--framework {'|'.join(FRAMEWORKS)}"
    ]
    assert "Traceback" not in result.output


#: A batchspec spec whose keys Axolotl's reader would take for its own (micro_batch_size).
SPEC_LIKE_AXOLOTL = (
    "global_batch_size: 64\nmicro_batch_size: 4\nworld_size: 8\npipeline_parallel_size: 2\n"
)


@pytest.mark.parametrize("command", ["inspect", "validate", "convert", "update"])
def test_a_spec_is_not_read_as_the_framework_its_keys_resemble(tmp_path, command):
    """Read as Axolotl it was "ok" with world 8 and pipeline 2 ignored, while smoke, estimate
    and tune read the same file as a spec: one file, one reading, so here it is refused."""
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_LIKE_AXOLOTL)
    extra = {
        "convert": ["--to", "deepspeed", "--out", tmp_path / "o"],
        "update": ["--world-size", 4],
    }
    result = run(command, path, *extra.get(command, []))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"batchspec: error: {path}: this is a batchspec spec (only spec keys), not a framework's "
        "config: plan, render, smoke, estimate and tune read it; give --framework to read it as "
        "a framework's config"
    ]
    assert result.stdout == "" and not (tmp_path / "o").exists()


def test_a_spec_read_as_a_spec_and_as_a_framework_when_asked(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_LIKE_AXOLOTL)
    planned = run("plan", path, "--json")
    assert json.loads(planned.stdout)["pipeline_parallel_size"] == 2
    asked = run("inspect", path, "--framework", "axolotl", "--json")
    assert asked.exit_code == 0 and json.loads(asked.stdout)["framework"] == "axolotl"
    # Beside other files in a pre-commit run it is passed over, as other files are.
    other = run("validate", path, "--skip-other-files")
    assert other.exit_code == 0 and other.output == ""


def test_a_file_of_keys_axolotl_shares_with_the_spec_reads_as_axolotl_everywhere(tmp_path):
    """What batchspec renders for Axolotl may hold micro_batch_size and
    gradient_accumulation_steps alone: that is Axolotl's file for inspect and smoke alike."""
    path = tmp_path / "axolotl.yaml"
    path.write_text("micro_batch_size: 2\ngradient_accumulation_steps: 4\n")
    inspected = run("inspect", path, "--world-size", "8", "--json")
    assert json.loads(inspected.stdout)["framework"] == "axolotl"
    smoked = run("smoke", path, "--nproc-per-node", "2", "--dry-run")
    assert "Axolotl smoke engine runs one process" in smoked.stderr
