"""litgpt's YAMLs and launch lines, read as its TrainArgs floors them, release by release; its
findings, rendering, update and convert. Nothing here imports litgpt (its own code runs in
tests/frameworks/litgpt/test_litgpt_native.py)."""

from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st
from run_batchspec import codes, read_and_inspect, run, run_json
from test_fuzz import FAST, mutated, survive

from translator.frameworks import FRAMEWORKS
from translator.frameworks.litgpt import engine, generation, rules
from translator.render import render
from translator.spec import BatchSpec

LITGPT = FRAMEWORKS["litgpt"]
#: A LitGPT YAML ``litgpt.yaml``, read and inspected at ``world``.
inspect = partial(read_and_inspect, LITGPT, name="litgpt.yaml")

PRETRAIN = """\
# config_hub style
model_name: pythia-160m
out_dir: out/pretrain
train:
  # Number of samples between optimizer steps across data-parallel ranks
  global_batch_size: {g}
  micro_batch_size: {m}
  max_norm: 1.0
devices: {d}
num_nodes: {n}
"""


@pytest.fixture
def release(monkeypatch):
    """Pretend litgpt ``version`` (a tuple, or None: not installed) is installed here."""

    def pretend(version):
        monkeypatch.setattr(generation, "installed", lambda: version)

    pretend((0, 5, 13))
    return pretend


# The floors ------------------------------------------------------------------------------------


def test_global_64_on_3_gpus_with_micro_4_runs_60_and_says_so(release):
    got = inspect(PRETRAIN.format(g=64, m=4, d=3, n=1))
    assert (got.values["global_batch_size"], got.values["gradient_accumulation_steps"]) == (60, 5)
    floor = codes(got)["litgpt-floor"]
    assert floor.severity == "error" and floor.where == "litgpt.yaml:6"
    assert "64 // 3 ranks = 21 per rank, // micro 4 = accumulation 5" in floor.message
    assert "= 60 samples per optimizer step, not 64" in floor.message


@pytest.mark.parametrize("g, m, d", [(64, 4, 3), (100, 8, 4), (10, 4, 1), (1000, 3, 7)])
def test_each_global_the_floor_hint_names_runs_exactly(release, g, m, d):
    hint = codes(inspect(PRETRAIN.format(g=g, m=m, d=d, n=1)))["litgpt-floor"].hint
    named = hint.split("train.global_batch_size to ", 1)[1].split(",", 1)[0].split(";", 1)[0]
    for value in map(int, named.split(" or ")):
        fixed = inspect(PRETRAIN.format(g=value, m=m, d=d, n=1))
        assert "litgpt-floor" not in codes(fixed)
        assert fixed.values["global_batch_size"] == value


def test_a_global_below_one_micro_batch_per_rank_is_litgpts_assert(release):
    got = inspect(PRETRAIN.format(g=16, m=4, d=8, n=1))
    found = codes(got)["litgpt-batch-too-small"]
    assert "16 // 8 ranks = 2 per rank, // micro 4 = 0 micro-batches" in found.message
    assert "at least 32" in found.hint
    assert "gradient_accumulation_steps" not in got.values
    fixed = inspect(PRETRAIN.format(g=32, m=4, d=8, n=1))
    assert fixed.values["gradient_accumulation_steps"] == 1


def test_an_exact_file_has_no_finding_above_info(release):
    got = inspect(PRETRAIN.format(g=512, m=4, d=8, n=1))
    assert got.spec.gradient_accumulation_steps == 16
    assert [f for f in got.findings if f.severity != "info"] == []


# The releases ----------------------------------------------------------------------------------


def test_before_058_the_global_batch_is_per_node(release):
    release((0, 5, 7))
    got = inspect(PRETRAIN.format(g=512, m=4, d=8, n=2))
    # 512 // 8 = 64 per rank, // 4 = 16: 4 × 16 × 16 ranks = 1024
    assert (got.values["global_batch_size"], got.values["gradient_accumulation_steps"]) == (
        1024,
        16,
    )
    found = codes(got)["litgpt-per-node-batch"]
    assert found.severity == "warning" and "litgpt 0.5.7 (installed here)" in found.message
    assert "global_batch_size: 256 for a global batch of 512" in found.hint
    fixed = inspect(PRETRAIN.format(g=256, m=4, d=8, n=2))
    assert fixed.values["global_batch_size"] == 512


@pytest.mark.parametrize("version", [(0, 5, 8), (0, 5, 13), None])
def test_from_058_and_when_not_installed_the_global_batch_counts_every_node(release, version):
    release(version)
    got = inspect(PRETRAIN.format(g=512, m=4, d=8, n=2))
    assert (got.values["global_batch_size"], got.values["gradient_accumulation_steps"]) == (512, 8)
    found = codes(got)["litgpt-global-since-058"]
    assert "ran 1024 samples per step on 2 nodes" in found.message
    assert "litgpt-per-node-batch" not in codes(got)


OLD = """\
checkpoint_dir: checkpoints/meta-llama/Llama-2-7b-hf
devices: 1
train:
  global_batch_size: 8
  micro_batch_size: 2
  learning_rate: 0.0002
  beta2: 0.95
"""


@pytest.mark.parametrize("version, refused", [((0, 3, 1), False), ((0, 4, 0), True), (None, True)])
def test_optimizer_keys_under_train_are_refused_from_040(release, version, refused):
    release(version)
    got = codes(inspect(OLD))
    assert ("litgpt-old-optimizer-keys" in got) is refused
    if refused:
        found = got["litgpt-old-optimizer-keys"]
        assert found.where == "litgpt.yaml:6"
        assert "train.learning_rate → optimizer.init_args.lr" in found.hint


def test_a_version_with_a_pre_release_tail_parses():
    assert generation.parse("0.4.0.dev0") == (0, 4, 0)
    assert generation.parse("0.5.13") == (0, 5, 13)


# Defaults, devices, the world ------------------------------------------------------------------


def test_a_finetune_file_without_a_train_block_takes_finetunes_defaults(release):
    got = inspect("checkpoint_dir: checkpoints/x\nout_dir: out/x\nprecision: bf16-true\n")
    assert (got.values["global_batch_size"], got.values["micro_batch_size"]) == (16, 1)
    assert got.values["world_size"] == 1


def test_a_default_of_an_unknown_command_is_unknown_not_a_number(release):
    got = inspect("devices: 2\ntrain:\n  global_batch_size: 32\n")
    assert "micro_batch_size" not in got.values
    found = codes(got)["litgpt-default-unknown"]
    assert "4 for litgpt pretrain, 1 for the finetune commands" in found.message


def test_devices_auto_takes_the_launchs_world_and_is_unknown_without_one(release):
    text = PRETRAIN.format(g=512, m=4, d="auto", n=1)
    alone = inspect(text)
    assert "world_size" not in alone.values and "world-unknown" in codes(alone)
    launched = inspect(text, world=4)
    assert launched.values["gradient_accumulation_steps"] == 32
    assert "litgpt-devices-auto" in codes(launched)


def test_devices_that_are_not_the_launchs_world_are_fabrics_refusal(release):
    got = inspect(PRETRAIN.format(g=256, m=8, d=4, n=1), world=8)
    found = codes(got)["litgpt-world-mismatch"]
    assert "the product (4 * 1) does not match the world size (8)" in found.message
    assert found.hint.startswith("set devices: 8")
    assert "global_batch_size" not in got.values  # nothing runs


def test_a_typo_of_a_train_key_is_an_error_naming_the_key(release):
    got = codes(inspect("model_name: x\ndevices: 1\ntrain:\n  global_batchsize: 8\n"))
    assert (
        got["batch-key-typo"].hint == "rename 'train.global_batchsize' to 'train.global_batch_size'"
    )


def test_model_parallel_specs_are_refused_with_a_layout_that_keeps_the_batch():
    spec = BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8, tensor_parallel_size=2)
    (found,) = LITGPT.check(spec)
    assert found.code == "litgpt-no-model-parallel"
    assert "accumulation 4 keeps global 64" in found.hint  # 64 = 2 × 4 × 8


# Recognising -----------------------------------------------------------------------------------


def test_a_litgpt_yaml_is_litgpts_and_an_axolotl_yaml_is_not(tmp_path):
    (tmp_path / "l.yaml").write_text(PRETRAIN.format(g=8, m=2, d=1, n=1))
    (tmp_path / "a.yaml").write_text("base_model: x\nmicro_batch_size: 2\n")
    _, out = run_json("inspect", tmp_path / "l.yaml", tmp_path / "a.yaml")
    assert [f["framework"] for f in out["files"]] == ["litgpt", "axolotl"]
    assert not rules.claims("base_model: x\nmicro_batch_size: 2\n")
    assert not rules.claims("output_dir: /tmp\ncheckpoint_dir: /tmp\nbatch_size: 4\n")


# Rendering, update, convert --------------------------------------------------------------------


def test_a_rendered_multinode_file_reads_back_and_says_the_old_per_node_value(release):
    spec = BatchSpec(global_batch_size=256, micro_batch_size=4, nodes=2, gpus_per_node=8)
    text = render(spec, LITGPT).text
    assert "devices: 8\nnum_nodes: 2\n" in text and "there it would be 128" in text
    got = inspect(text)
    assert got.spec.gradient_accumulation_steps == 4 and got.spec.world_size == 16


def update(path, *args):
    result = run("update", path, *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_update_changes_the_batch_and_keeps_every_other_byte(tmp_path):
    text = PRETRAIN.format(g=512, m=4, d=8, n=1)
    path = tmp_path / "p.yaml"
    path.write_text(text)
    out = update(path, "--nnodes", 2, "--nproc-per-node", 8, "--global-batch", 1024)
    assert out == text.replace("global_batch_size: 512", "global_batch_size: 1024").replace(
        "num_nodes: 1", "num_nodes: 2"
    )


@pytest.mark.parametrize(
    "layout", [("--world-size", 16), ("--world-size", 16, "--nproc-per-node", 8)]
)
def test_update_past_one_node_adds_num_nodes_the_config_lacks(tmp_path, layout):
    """litgpt's config_hub pretrain YAMLs write devices (per node) and leave num_nodes at its
    default, 1: a world of two nodes of 8 adds num_nodes: 2, devices kept."""
    text = PRETRAIN.format(g=512, m=4, d=8, n=1).replace("num_nodes: 1\n", "")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    out = update(path, *layout)
    assert out == text.replace("devices: 8\n", "devices: 8\nnum_nodes: 2\n")
    assert update(path, "--world-size", 4) == text.replace("devices: 8", "devices: 4")


def test_update_writes_a_missing_key_where_litgpt_reads_it(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("model_name: x\ndevices: 2\ntrain:\n    global_batch_size: 8\n")
    out = update(path, "--world-size", 4, "--nproc-per-node", 4, "--micro-batch", 2)
    assert (
        out
        == "model_name: x\ndevices: 4\ntrain:\n    global_batch_size: 8\n    micro_batch_size: 2\n"
    )
    path.write_text("checkpoint_dir: c\nout_dir: o\n")  # finetune defaults: 16 / 1 on 1 device
    out = update(path, "--world-size", 2, "--nproc-per-node", 2, "--micro-batch", 2)
    assert out == (
        "checkpoint_dir: c\ndevices: 2\nout_dir: o\n"
        "train:\n  global_batch_size: 16\n  micro_batch_size: 2\n"
    )
    assert inspect(out).spec.gradient_accumulation_steps == 4


def test_update_rewrites_a_floored_file_to_an_exact_one(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text(PRETRAIN.format(g=64, m=4, d=3, n=1))
    out = update(path, "--nnodes", 1, "--nproc-per-node", 4, "--global-batch", 64)
    assert out == PRETRAIN.format(g=64, m=4, d=4, n=1)
    assert not [f for f in inspect(out).findings if f.severity == "error"]


def test_convert_onto_an_existing_litgpt_file_keeps_its_other_bytes(tmp_path):
    (tmp_path / "ds.json").write_text(
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 4}'
    )
    result = run(
        "convert", tmp_path / "ds.json", "--to", "litgpt", "--world-size", 8, "--out", tmp_path
    )
    assert result.exit_code == 0, result.stderr
    written = (tmp_path / "litgpt.yaml").read_text()
    assert inspect(written).spec.global_batch_size == 64
    # and an existing config takes the converted batch by update, its other lines unchanged
    mine = tmp_path / "mine.yaml"
    mine.write_text(PRETRAIN.format(g=512, m=4, d=8, n=1))
    out = update(mine, "--global-batch", 64, "--micro-batch", 2)
    assert out == PRETRAIN.format(g=64, m=2, d=8, n=1)


# Launch lines ----------------------------------------------------------------------------------


CONFIG = PRETRAIN.format(g=512, m=16, d=8, n=1)


def job(tmp_path, script):
    (tmp_path / "pretrain.yaml").write_text(CONFIG)
    (tmp_path / "job.sh").write_text(script)
    result, out = run_json("inspect", tmp_path / "job.sh")
    return result.exit_code, out


def test_flags_after_the_config_win_and_a_config_after_a_flag_wins(tmp_path):
    code, out = job(
        tmp_path, "litgpt pretrain --config pretrain.yaml --train.micro_batch_size=8 --devices 4\n"
    )
    assert (code, out["micro_batch_size"], out["world_size"]) == (0, 8, 4)
    assert out["gradient_accumulation_steps"] == 16  # 512 // 4 // 8
    code, out = job(tmp_path, "litgpt pretrain --train.micro_batch_size 8 --config pretrain.yaml\n")
    assert (out["micro_batch_size"], out["world_size"]) == (16, 8)


def test_an_unknown_override_leaves_the_batch_unknown(tmp_path):
    code, out = job(
        tmp_path, "litgpt pretrain --config pretrain.yaml --train.global_batch_size $G\n"
    )
    assert out["global_batch_size"] is None
    assert "unknown-value" in {f["code"] for f in out["findings"]}


def test_a_bare_batch_key_is_refused_naming_the_right_one(tmp_path):
    code, out = job(
        tmp_path, "python -m litgpt finetune_full ckpt --devices 2 --global_batch_size 32\n"
    )
    (found,) = [f for f in out["findings"] if f["code"] == "litgpt-not-an-option"]
    assert code == 1 and found["hint"] == "write --train.global_batch_size"


def test_under_srun_the_devices_must_be_the_tasks_per_node(tmp_path):
    script = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n"
        "srun litgpt finetune_lora ckpt --data Alpaca\n"
    )
    code, out = job(tmp_path, script)
    (found,) = [f for f in out["findings"] if f["code"] == "litgpt-world-mismatch"]
    assert code == 1 and found["hint"].startswith("set devices: 4 and num_nodes: 2")


def test_an_old_release_script_run_by_python_is_read(tmp_path):
    code, out = job(tmp_path, "python litgpt/pretrain.py --config pretrain.yaml --devices 2\n")
    assert (code, out["world_size"], out["gradient_accumulation_steps"]) == (0, 2, 16)


# The engine refuses before starting --------------------------------------------------------------


def test_the_engine_refuses_several_processes_on_cpu_and_model_parallelism():
    two = BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2)
    assert "FSDP is only available on GPU" in engine.refuse(two, "cpu")
    assert engine.refuse(two, "gpu") is None
    tp = BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2, tensor_parallel_size=2)
    assert "not tensor 2" in engine.refuse(tp, "gpu")
    assert (
        engine.refuse(BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=1), "cpu")
        is None
    )


#: Words a litgpt command line may hold, well or badly formed.
WORDS = [
    *("--config", "pretrain.yaml", "--devices", "auto", "-1", "0", "3", "x", "$N", "--num_nodes"),
    *("--train.global_batch_size", "--train.micro_batch_size=2", "--train.micro_batch_size"),
    *("--global_batch_size", "--train.global-batch-size=8", "64", "--", "''", "--train"),
]


# Hostile input -----------------------------------------------------------------------------------


@FAST
@given(data=st.data())
def test_mutated_litgpt_files_never_crash(data):
    text = data.draw(mutated(PRETRAIN.format(g=512, m=4, d=8, n=2) + OLD.split("\n", 1)[1]))
    survive("litgpt", text)


@FAST
@given(words=st.lists(st.sampled_from(WORDS), max_size=8))
def test_random_litgpt_command_lines_never_crash(tmp_path_factory, words):
    folder = tmp_path_factory.mktemp("job")
    (folder / "job.sh").write_text("litgpt pretrain " + " ".join(words) + "\n")
    result = run("inspect", folder / "job.sh")
    assert result.exit_code in (0, 1, 2)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


def test_update_of_a_job_edits_litgpts_words_and_the_launchers_together(tmp_path):
    (tmp_path / "pretrain.yaml").write_text(CONFIG)
    script = "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\nsrun litgpt pretrain --config pretrain.yaml --num_nodes 2\n"
    (tmp_path / "job.sh").write_text(script)
    out = update(tmp_path / "job.sh", "--nnodes", 4, "--nproc-per-node", 8)
    assert out == script.replace("nodes=2", "nodes=4").replace("--num_nodes 2", "--num_nodes 4")
    run_alone = "litgpt pretrain --config pretrain.yaml --train.micro_batch_size=8 --devices 4\n"
    (tmp_path / "job.sh").write_text(run_alone)
    out = update(tmp_path / "job.sh", "--nnodes", 1, "--nproc-per-node", 8)
    assert out == run_alone.replace("--devices 4", "--devices 8")
