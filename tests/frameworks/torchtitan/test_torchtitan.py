"""torchtitan: its TOML job files and its launches, counted as ParallelDims and
Trainer.__init__ count; the tests that ask torchtitan itself are marked native."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner
from run_batchspec import codes, read_and_inspect, run, run_json
from test_named_model import TINY

from translator.cli import main
from translator.frameworks import get
from translator.frameworks.torchtitan import keys
from translator.inspection import inspect_reading
from translator.reading import Launch
from translator.render import render
from translator.spec import BatchSpec

torchtitan = get("torchtitan")


def inspect(text: str, world: int | None, path: str = "job.toml", **sizes):
    """``text``, indented here, dedented as the file ``path`` and inspected at ``world``."""
    return read_and_inspect(torchtitan, textwrap.dedent(text), world, path, **sizes)


@pytest.fixture(autouse=True)
def installed(monkeypatch):
    """As if torchtitan 0.3.0 were installed, whatever this venv holds."""
    monkeypatch.setattr(keys, "installed", lambda: ("0.3.0", "python"))


TOML = """\
    [training]
    local_batch_size = 2
    global_batch_size = 64
    seq_len = 4096  # tokens
    steps = 10_000

    [parallelism]
    data_parallel_shard_degree = -1
    tensor_parallel_degree = 2
"""


def test_a_toml_job_file_counts_as_its_trainer():
    got = inspect(TOML, 16)
    assert got.spec is not None
    assert (got.spec.data_parallel, got.spec.micro, got.spec.accumulation) == (8, 2, 4)
    assert got.spec.sequence_length == 4096
    reading = got.reading
    start, end = reading.values["training.seq_len"].span
    assert reading.text[start:end] == "4096"


def test_global_minus_one_follows_the_world_and_the_hint_pins_it():
    got = inspect(TOML.replace("global_batch_size = 64", "global_batch_size = -1"), 16)
    (follows,) = [f for f in got.findings if f.code == "torchtitan-global-follows-world"]
    assert got.spec.global_batch_size == 16 and "set training.global_batch_size to 16" in (
        follows.hint or ""
    )


def test_a_global_batch_no_multiple_of_local_times_dp_is_torchtitans_assert():
    got = inspect(TOML.replace("global_batch_size = 64", "global_batch_size = 60"), 16)
    (wrong,) = [f for f in got.findings if f.code == "torchtitan-global-not-divisible"]
    assert "(60 % (2 * 8) != 0)" in wrong.message and wrong.where == "job.toml:3"
    for fix in (48, 64):
        assert wrong.hint is not None and str(fix) in wrong.hint
        fixed = inspect(TOML.replace("global_batch_size = 64", f"global_batch_size = {fix}"), 16)
        assert "torchtitan-global-not-divisible" not in codes(fixed)


def test_a_shard_degree_that_does_not_fill_the_world_is_refused_and_the_hint_fills_it():
    text = TOML.replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 4")
    got = inspect(text, 16)
    (mesh,) = [f for f in got.findings if f.code == "torchtitan-mesh"]
    assert "dp_shard(4) * cp(1) * tp(2) * pp(1) != WORLD_SIZE(16)" in mesh.message
    assert mesh.hint is not None and "to 8" in mesh.hint
    fixed = inspect(text.replace("degree = 4", "degree = 8"), 16)
    assert "torchtitan-mesh" not in codes(fixed) and fixed.spec.data_parallel == 8


def test_an_explicit_shard_degree_implies_the_world():
    text = TOML.replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 4")
    got = inspect(text, None)
    assert got.spec.world == 8 and got.spec.accumulation == 8


def test_pipeline_micro_batches_are_the_canonical_micro_batch():
    text = """\
        [training]
        local_batch_size = 8
        global_batch_size = 64
        [parallelism]
        pipeline_parallel_degree = 2
        pipeline_parallel_microbatch_size = 2
    """
    got = inspect(text, 8)
    # DP 4; GA 64 / (8 * 4) = 2; 8 / 2 = 4 pipeline micro-batches of 2
    assert (got.spec.micro, got.spec.accumulation, got.spec.data_parallel) == (2, 8, 4)
    wrong = inspect(text.replace("microbatch_size = 2", "microbatch_size = 3"), 8)
    (split,) = [f for f in wrong.findings if f.code == "torchtitan-pp-microbatch"]
    assert split.hint == "set training.local_batch_size to 6 or 9"
    for fix in (6, 9):
        fixed = inspect(
            text.replace("microbatch_size = 2", "microbatch_size = 3").replace(
                "local_batch_size = 8", f"local_batch_size = {fix}"
            ),
            8,
        )
        assert "torchtitan-pp-microbatch" not in codes(fixed)


TOKENS = """\
    #!/bin/bash
    torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_8b \\
      --training.num_tokens_per_microbatch_per_dp_rank 16384 \\
      --training.num_tokens_per_train_step 524288 \\
      --training.max_context_length 8192 \\
      --parallelism.context_parallel_degree 2 --parallelism.tensor_parallel_degree 1 \\
      --parallelism.pipeline_parallel_degree 1 \\
      --parallelism.data_parallel_replicate_degree 1 --parallelism.data_parallel_shard_degree -1
"""


def test_the_token_generation_counts_tokens_and_names_the_sample_keys():
    got = inspect(TOKENS, None, "train.sh")
    assert (got.spec.global_batch_size, got.spec.micro, got.spec.data_parallel) == (64, 2, 4)
    (other,) = [f for f in got.findings if f.code == "torchtitan-other-generation"]
    assert other.hint is not None
    assert "--training.local_batch_size 2 --training.global_batch_size 64" in other.hint
    assert "--training.seq_len 8192" in other.hint


def test_tokens_that_do_not_divide_are_torchtitans_value_error():
    got = inspect(TOKENS.replace("524288", "500000"), None, "train.sh")
    (wrong,) = [f for f in got.findings if f.code == "torchtitan-tokens-not-divisible"]
    assert "(500000) must be divisible by" in wrong.message and "(65536)" in wrong.message
    assert wrong.hint is not None and "458752 or 524288" in wrong.hint
    for fix in ("458752", "524288"):
        fixed = inspect(TOKENS.replace("524288", fix), None, "train.sh")
        assert "torchtitan-tokens-not-divisible" not in codes(fixed)


def test_a_toml_file_is_a_finding_for_an_installed_0_3_0_with_its_flags():
    got = inspect(TOML, 16)
    (unread,) = [f for f in got.findings if f.code == "torchtitan-toml-unread"]
    assert "--training.local_batch_size 2 --training.global_batch_size 64" in (unread.hint or "")


def test_no_finding_on_the_generation_when_torchtitan_is_not_installed(monkeypatch):
    monkeypatch.setattr(keys, "installed", lambda: None)
    got = inspect(TOML, 16)
    assert codes(got).keys() & {"torchtitan-toml-unread", "torchtitan-other-generation"} == set()
    assert "torchtitan-generation" in codes(got)


def test_flags_win_over_the_toml_the_job_names(tmp_path):
    (tmp_path / "debug.toml").write_text(textwrap.dedent(TOML))
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/bin/bash\nNGPU=${NGPU:-8}\ntorchrun --nproc_per_node=${NGPU} -m torchtitan.train "
        "--job.config_file debug.toml --training.global_batch_size=32\n"
    )
    _, out = run_json("inspect", script, "--run-dir", tmp_path)
    assert (out["global_batch_size"], out["micro_batch_size"], out["world_size"]) == (32, 2, 8)
    lost = [s for s in out["sources"] if s["field"] == "global_batch_size" and not s["won"]]
    assert lost and lost[0]["value"] == 64


def test_a_config_function_leaves_the_keys_it_sets_unknown():
    got = inspect(
        "#!/bin/bash\ntorchrun --nproc_per_node 8 -m torchtitan.train --module llama3 "
        "--config llama3_8b --training.local_batch_size 2\n",
        None,
        "run.sh",
    )
    assert got.spec is None and "torchtitan-config-function" in codes(got)
    assert "global_batch_size" not in got.values


def test_malformed_toml_is_one_line_naming_the_file_and_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[training]\nlocal_batch_size = = 2\n")
    result = run("inspect", path)
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(f"batchspec: error: {path}:2: not valid TOML")
    assert "Traceback" not in result.output


def test_a_toml_that_is_no_torchtitan_job_is_refused(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n')
    result = run("inspect", path)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"batchspec: error: {path}: not a torchtitan job file (it has no [training] or "
        "[parallelism] table)"
    )


def test_update_inserts_the_global_batch_under_its_table_and_keeps_every_other_byte(tmp_path):
    text = "[training]\nlocal_batch_size = 8  # per rank\nsteps = 10\n\n[model]\nname = 'x'\n"
    path = tmp_path / "job.toml"
    path.write_text(text)
    args = ["update", str(path), "--from-world-size", "2", "--world-size", "1"]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert result.stdout == text.replace("steps = 10\n", "steps = 10\nglobal_batch_size = 16\n")


def test_update_rewrites_a_launchs_flag_in_place(tmp_path):
    text = (
        "#!/bin/bash\ntorchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config c "
        "--training.local_batch_size 4 --training.global_batch_size 64 \\\n"
        "  --parallelism.data_parallel_shard_degree 8 --parallelism.tensor_parallel_degree 1 "
        "--parallelism.pipeline_parallel_degree 1 --parallelism.context_parallel_degree 1 "
        "--parallelism.data_parallel_replicate_degree 1\n"
    )
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = run("update", path, "--world-size", "4")
    assert result.exit_code == 0, result.output
    assert result.stdout == text.replace("nproc_per_node 8", "nproc_per_node 4").replace(
        "shard_degree 8", "shard_degree 4"
    )


def test_convert_a_toml_to_megatron(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(textwrap.dedent(TOML))
    args = ["convert", str(path), "--to", "megatron", "--world-size", "16", "--out", str(tmp_path)]
    result = run(*args)
    assert result.exit_code == 0, result.output
    megatron = (tmp_path / "megatron.sh").read_text()
    assert "--global-batch-size 64" in megatron and "--micro-batch-size 2" in megatron


def test_the_rendered_launch_reads_back_with_pipeline_parallel():
    spec = BatchSpec(
        global_batch_size=128,
        micro_batch_size=2,
        world_size=16,
        tensor_parallel_size=2,
        pipeline_parallel_size=2,
    )
    rendered = render(spec, torchtitan)
    assert "--training.local_batch_size 32" in rendered.text
    assert "--training.disable_cuda_graphs \\\n" in rendered.text
    got = inspect_reading(torchtitan, torchtitan.read(rendered.text, "t.sh"), Launch.of(spec))
    assert (got.spec.micro, got.spec.accumulation) == (2, 16)


# torchtitan's own code ---------------------------------------------------------------------


@pytest.mark.framework
@pytest.mark.native
def test_torchtitan_accepts_a_rendered_launch_and_refuses_a_wrong_one(tmp_path):
    import torchtitan  # noqa: F401  (the native venv's)

    spec = BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8)
    (tmp_path / "spec.json").write_text(spec.model_dump_json(exclude_none=True))
    runner = CliRunner()
    runner.invoke(
        main, ["render", str(tmp_path / "spec.json"), "--to", "torchtitan", "--out", str(tmp_path)]
    )
    script = tmp_path / "torchtitan.sh"
    result = runner.invoke(main, ["validate", str(script), "--with-framework", "--json"])
    found = {f["code"]: f["message"] for f in json.loads(result.stdout)["files"][0]["findings"]}
    assert result.exit_code == 0 and "4 accumulation steps" in found["framework-accepts"]
    wrong = script.read_text().replace(
        "--training.global_batch_size 64", "--training.global_batch_size 60"
    )
    script.write_text(wrong)
    result = runner.invoke(main, ["validate", str(script), "--with-framework", "--json"])
    found = {f["code"]: f["message"] for f in json.loads(result.stdout)["files"][0]["findings"]}
    assert result.exit_code == 1
    assert "(60 % (2 * 8) != 0)" in found["framework-refuses"]


@pytest.mark.framework
@pytest.mark.native
def test_torchtitans_config_refuses_a_pipeline_split_and_a_bad_mesh():
    from translator.frameworks.torchtitan.verdict import configured

    with pytest.raises(ValueError, match="must be evenly divisible"):
        configured(
            {
                "training.local_batch_size": 6,
                "parallelism.pipeline_parallel_degree": 2,
                "parallelism.pipeline_parallel_microbatch_size": 4,
                "training.disable_cuda_graphs": True,
            },
            8,
        )
    with pytest.raises(AssertionError, match="Invalid parallel dims"):
        configured({"parallelism.data_parallel_shard_degree": 3}, 8)


@pytest.mark.framework
@pytest.mark.native
def test_smoke_runs_torchtitans_trainer_on_two_cpu_ranks_and_expect_global_can_fail(tmp_path):
    """torchtitan's own Trainer, 2 gloo ranks: 2 × 2 accumulation × 2 ranks = 8 per step. On the
    job's model: the rendered launch's ``llama3_debugmodel`` (its flavor's count, the analytic
    one), then the tiny Llama of issue 27 given as a config.json, built by llama3's model code
    (156,480 parameters counted on the built model)."""
    import torchtitan  # noqa: F401  (the native venv's)

    from translator.frameworks.torchtitan import models as coded_models

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"global_batch_size": 8, "micro_batch_size": 2, "world_size": 2}))
    runner = CliRunner()
    runner.invoke(main, ["render", str(spec), "--to", "torchtitan", "--out", str(tmp_path)])
    args = [
        "smoke",
        str(tmp_path / "torchtitan.sh"),
        "--nproc-per-node",
        "2",
        "--device",
        "cpu",
        "--seq-len",
        "32",
        "--steps",
        "2",
        "--workdir",
        str(tmp_path / "work"),
        "--json",
    ]
    result = runner.invoke(main, [*args, "--expect-global", "8"])
    out = json.loads(result.stdout)
    assert result.exit_code == 0, out
    assert out["samples_per_optimizer_step"] == [8, 8] and out["stepped_by"] == "AdamW", out
    debugmodel, _ = coded_models.torchtitan_model("llama3", "debugmodel")
    assert out["model"]["parameters"] == debugmodel.parameters and not out["model"]["stand_in"]
    assert out["model"]["architecture"] == "llama3 debugmodel (llama3_debugmodel)"
    # torchtitan's flavors are Python config functions: a shape of the job's own is given
    # as --model-config
    tiny = tmp_path / "tiny-llama"
    tiny.mkdir()
    (tiny / "config.json").write_text(json.dumps(TINY))
    quick = [a if a != "2" or i != args.index("--steps") + 1 else "1" for i, a in enumerate(args)]
    wrong = runner.invoke(main, [*quick, "--expect-global", "16", "--model-config", str(tiny)])
    assert wrong.exit_code == 1
    model = json.loads(wrong.stdout)["model"]
    assert (model["parameters"], model["stand_in"], model["source"]) == (156_480, False, str(tiny))
