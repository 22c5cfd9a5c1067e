"""HF Trainer programs in launch scripts: their arguments read with HfArgumentParser's rules,
the files they name read with them, precedence between sources, and every command on a job."""

import json

import pytest
from run_batchspec import inspect_job, run

AUTO = '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}'


pytestmark = pytest.mark.usefixtures("in_tmp_path")


@pytest.mark.parametrize(
    "flags, micro, accumulation",
    [
        ("--per_device_train_batch_size 4 --gradient_accumulation_steps 2", 4, 2),
        ("--per_device_train_batch_size=4 --gradient_accumulation_steps=2", 4, 2),
        ("--per-device-train-batch-size 4 --gradient-accumulation-steps 2", 4, 2),
        # argparse: the last occurrence wins
        (
            "--per_device_train_batch_size 4 --per_device_train_batch_size 8 "
            "--gradient_accumulation_steps 2",
            8,
            2,
        ),
        # a flag the job does not pass is the program's own default: unknown
        ("--per_device_train_batch_size 4 --output_dir o", 4, None),
    ],
)
def test_training_arguments_flags(flags, micro, accumulation):
    _, out = inspect_job(f"torchrun --nproc_per_node 2 train.py {flags}\n")
    assert out["framework"] == "hf"
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (micro, accumulation)
    assert out["global_batch_size"] == (None if accumulation is None else micro * accumulation * 2)


def test_the_last_occurrence_is_the_source_that_wins():
    _, out = inspect_job(
        "torchrun train.py --per_device_train_batch_size 4 --gradient_accumulation_steps 1 \\\n"
        "    --per_device_train_batch_size 8\n",
    )
    micro = [s for s in out["sources"] if s["field"] == "micro_batch_size"]
    assert [(s["value"], s["won"]) for s in micro] == [(4, False), (8, True)]
    assert (
        "last occurrence" in micro[0]["why"]
        and micro[1]["where"] == "job.sh:3 --per_device_train_batch_size"
    )


def test_trl_config_file_gives_defaults_that_flags_override(tmp_path):
    (tmp_path / "recipe.yaml").write_text(
        "model_name_or_path: m\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 8\n"
    )
    _, out = inspect_job(
        "accelerate launch --num_processes 4 sft.py --config recipe.yaml "
        "--gradient_accumulation_steps 2\n",
    )
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (4, 2)
    assert out["global_batch_size"] == 32
    lost = [
        s for s in out["sources"] if s["field"] == "gradient_accumulation_steps" and not s["won"]
    ]
    assert lost and lost[0]["where"].endswith("recipe.yaml:3 gradient_accumulation_steps")
    assert "overrides the arguments file" in lost[0]["why"]


def test_a_single_yaml_argument_is_the_arguments_file(tmp_path):
    (tmp_path / "args.yaml").write_text(
        "output_dir: o\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 16\n"
    )
    _, out = inspect_job("torchrun --nproc_per_node 4 train.py args.yaml\n")
    assert out["global_batch_size"] == 128


def test_trl_vllm_serve_beside_the_training_is_no_training(tmp_path):
    """A GRPO job starts ``trl vllm-serve`` on one node and trains with ``trl grpo``: the
    server is not read as a training with trl's defaults; the training is."""
    script = (
        "trl vllm-serve --model Qwen/Qwen2.5-7B --tensor_parallel_size 8 &\n"
        "trl grpo --model_name_or_path m --per_device_train_batch_size 2 --num_processes 8\n"
    )
    _, out = inspect_job(script)
    assert out["micro_batch_size"] == 2
    (tmp_path / "serve.sh").write_text("#!/bin/bash\ntrl vllm-serve --model m\n")
    alone = run("inspect", "serve.sh")
    assert alone.exit_code == 2 and "micro batch" not in alone.output


def test_the_trl_tool_has_documented_defaults():
    _, out = inspect_job("trl sft --model_name_or_path m --num_processes 4\n")
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (8, 1)
    assert out["world_size"] == 4 and out["global_batch_size"] == 32


def test_the_deepspeed_json_is_filled_and_checked_as_the_trainer_does(tmp_path):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "auto.json").write_text(AUTO)
    (tmp_path / "ds" / "wrong.json").write_text('{"train_micro_batch_size_per_gpu": 16}')
    job = "deepspeed --num_gpus 8 train.py --deepspeed {} --per_device_train_batch_size 4 --gradient_accumulation_steps 1\n"
    code, out = inspect_job(job.format("ds/auto.json"))
    assert code == 0 and out["global_batch_size"] == 32
    assert any(f["code"] == "hf-auto" for f in out["findings"])
    code, out = inspect_job(job.format("ds/wrong.json"))
    assert code == 1
    mismatch = next(f for f in out["findings"] if f["code"] == "hf-deepspeed-mismatch")
    assert (
        "ds train_micro_batch_size_per_gpu=16 vs hf per_device_train_batch_size=4"
        in mismatch["message"]
    )


def test_relative_paths_start_where_the_job_runs_then_beside_the_script(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "zero3.json").write_text('{"train_micro_batch_size_per_gpu": 99}')
    job = "deepspeed --num_gpus 2 train.py --deepspeed {} --per_device_train_batch_size 4 --gradient_accumulation_steps 1\n"
    # from the repository root, as the script is run
    code, _ = inspect_job(job.format("./scripts/zero3.json"), name="scripts/t.sh")
    assert code == 1  # the JSON was found and disagrees
    # beside the script, when the current folder does not have it
    code, _ = inspect_job(job.format("zero3.json"), name="scripts/t.sh")
    assert code == 1
    # --run-dir overrides both
    other = tmp_path / "elsewhere"
    other.mkdir()
    code, out = inspect_job(
        job.format("zero3.json"),
        "--run-dir",
        str(other),
        name="scripts/t.sh",
    )
    assert code == 0
    missing = next(f for f in out["findings"] if f["code"] == "job-file-not-found")
    assert str(other / "zero3.json") in missing["message"]


def test_a_real_mismatch_fails_validate_and_a_sound_job_passes(tmp_path):
    (tmp_path / "good.sh").write_text(
        "torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2 "
        "--gradient_accumulation_steps 8\n"
    )
    (tmp_path / "notes.sh").write_text("#!/bin/bash\necho not a training job\n")
    result = run("validate", "--skip-other-files", "good.sh", "notes.sh")
    assert result.exit_code == 0, result.output
    assert "good.sh (hf): ok" in result.output and "notes.sh" not in result.output


def test_update_edits_the_flag_or_the_variable_behind_it(tmp_path):
    script = (
        "GPUS=4\nBS=2\n"
        "torchrun --nproc_per_node $GPUS train.py --per_device_train_batch_size $BS \\\n"
        "    --gradient_accumulation_steps 16 --output_dir out\n"
    )
    (tmp_path / "job.sh").write_text(script)
    args = ["update", "job.sh", "--world-size", "8", "--nproc-per-node", "8", "--in-place"]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "job.sh").read_text() == script.replace("GPUS=4", "GPUS=8").replace(
        "steps 16", "steps 8"
    )
    _, out = inspect_job((tmp_path / "job.sh").read_text())
    assert out["global_batch_size"] == 128 and out["world_size"] == 8


def test_update_edits_a_value_set_in_another_file_there(tmp_path):
    """The accumulation is the arguments file's: it is edited there, with the launch line, in
    one update (it was refused: "update that file")."""
    args = "output_dir: o\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 16\n"
    (tmp_path / "args.yaml").write_text(args)
    (tmp_path / "job.sh").write_text("torchrun --nproc_per_node 4 train.py args.yaml\n")
    result = run("update", "job.sh", "--world-size", "8", "--in-place")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "args.yaml").read_text() == args.replace("steps: 16", "steps: 8")
    assert (tmp_path / "job.sh").read_text() == (
        "torchrun --nnodes 2 --nproc_per_node 4 train.py args.yaml\n"
    )
    assert "args.yaml:3: gradient_accumulation_steps 16 → 8" in result.output.splitlines()


def test_convert_takes_a_job(tmp_path):
    (tmp_path / "job.sh").write_text(
        "torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2 "
        "--gradient_accumulation_steps 8\n"
    )
    result = run("convert", "job.sh", "--to", "deepspeed", "--out", "out")
    assert result.exit_code == 0, result.output
    ds = json.loads((tmp_path / "out" / "deepspeed.json").read_text())
    assert ds["train_batch_size"] == 128 and ds["gradient_accumulation_steps"] == 8


def test_a_training_arguments_json_with_a_deepspeed_key_is_the_trainers(tmp_path):
    (tmp_path / "ds.json").write_text(AUTO)
    (tmp_path / "args.json").write_text(
        json.dumps(
            {
                "output_dir": "o",
                "per_device_train_batch_size": 4,
                "gradient_accumulation_steps": 2,
                "deepspeed": "ds.json",
            }
        )
    )
    result = run("inspect", "args.json", "--world-size", "2", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["framework"] == "hf" and out["global_batch_size"] == 16


@pytest.mark.framework
def test_transformers_own_check_agrees_on_a_job(tmp_path):
    """validate --with-framework feeds the TrainingArguments the job's flags give, and the JSON
    it names, to transformers' HfArgumentParser and HfTrainerDeepSpeedConfig."""
    (tmp_path / "bad.json").write_text('{"train_micro_batch_size_per_gpu": 8}')
    (tmp_path / "auto.json").write_text(AUTO)
    job = "torchrun --nproc_per_node 2 train.py --deepspeed {} --per_device_train_batch_size 4 --gradient_accumulation_steps 2 --output_dir o\n"
    (tmp_path / "good.sh").write_text(job.format("auto.json"))
    (tmp_path / "bad.sh").write_text(job.format("bad.json"))
    result = run("validate", "--with-framework", "--json", "good.sh", "bad.sh")
    assert result.exit_code == 1, result.output
    good, bad = json.loads(result.stdout)["files"]
    accepts = next(f for f in good["findings"] if f["code"] == "framework-accepts")
    assert "total train batch size at world 2: 16" in accepts["message"]
    refuses = next(f for f in bad["findings"] if f["code"] == "framework-refuses")
    assert (
        "ds train_micro_batch_size_per_gpu=8 vs hf per_device_train_batch_size=4"
        in refuses["message"]
    )


def test_a_cd_before_the_launch_moves_where_its_files_are_looked_for(tmp_path):
    (tmp_path / "sub" / "conf").mkdir(parents=True)
    (tmp_path / "sub" / "conf" / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 99}')
    launch = (
        "torchrun --nproc_per_node 2 train.py --deepspeed conf/ds.json "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 1 --output_dir o\n"
    )
    code, _ = inspect_job("cd sub\n" + launch)
    assert code == 1  # found there, and it disagrees
    code, out = inspect_job("(cd sub && ls)\n" + launch)
    assert code == 0  # a subshell's cd stays in it
    assert any(f["code"] == "job-file-not-found" for f in out["findings"])
    _, out = inspect_job('cd "$(mktemp -d)"\n' + launch)
    assert any("moves (cd) to a folder not known" in f["message"] for f in out["findings"])
