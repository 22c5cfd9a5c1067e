"""smoke --parity: one global batch split two ways must train the same first step."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from paths import ROOT
from run_batchspec import run
from test_named_model import TINY, folder_with

from translator.launch import parity_compare
from translator.rank import parity_rank

SPEC = "global_batch_size: 8\nmicro_batch_size: 4\nsequence_length: 32\n"
#: The transformers release whose Trainer normalised the loss of each micro-batch on its own
#: (fixed in 4.46), and releases of its dependencies that install beside it.
OLD_TRANSFORMERS = {
    "transformers": "4.45.2",
    "tokenizers": "0.20.3",
    "huggingface-hub": "0.25.2",
    "accelerate": "1.0.1",
}


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


def parity_json(*args, python=sys.executable, env=None, timeout=600):
    """``batchspec smoke ... --json`` in a subprocess (its ranks need a real process tree)."""
    done = subprocess.run(
        [python, "-m", "translator", "smoke", *map(str, args), "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


# Pure parts ------------------------------------------------------------------------------------


def test_samples_have_different_lengths_and_padding_is_never_predicted():
    tokens, targets = parity_rank.shifted(range(8), 32, 512)
    lengths = {parity_rank.real_tokens(i, 33) for i in range(8)}
    assert len(lengths) == 8 and min(lengths) >= parity_rank.MIN_TOKENS
    assert parity_rank.predicted(targets) == sum(n - 1 for n in lengths)
    for i in range(8):
        real = parity_rank.real_tokens(i, 33)
        assert (tokens[i, real:] == parity_rank.PAD).all() and (tokens[i, :real] > 0).all()
    # Sample i is the same row whatever batch it is drawn in.
    again, _ = parity_rank.shifted([5, 2], 32, 512)
    assert torch.equal(again[0], tokens[5]) and torch.equal(again[1], tokens[2])


def test_compare_names_the_parameter_that_differs_most():
    update = {"a.weight": torch.ones(3), "b.bias": torch.full((2,), 0.5)}
    a = {"loss": 2.0, "initial": "x", "update": update}
    b = {"loss": 2.0, "initial": "x", "update": update | {"b.bias": torch.tensor([0.5, 1.5])}}
    diff = parity_compare.compare(a, b)
    assert diff.largest == ("b.bias", 2.0)
    (message,) = parity_compare.problems(diff, 1e-3)
    assert message == "the update of b.bias differs by 200% of A's (tolerance 0.1%)"
    assert parity_compare.problems(parity_compare.compare(a, a), 1e-3) == []
    # Steps that held different samples are no comparison of splits, and parity says so.
    held = parity_rank.held([b"one", b"two"])
    assert held == parity_rank.held([b"two", b"one"]) != parity_rank.held([b"one", b"three"])
    other = parity_compare.compare(a | {"samples": held}, a | {"samples": parity_rank.held([b"1"])})
    assert parity_compare.problems(other, 1e-3) == [
        "the two runs' steps held different samples (A 2, B 1): the split changed what a step "
        "trains on"
    ]
    other = parity_compare.compare(a, b | {"initial": "y", "loss": 3.0})
    assert (
        parity_compare.problems(other, 1e-3)[0]
        == "the two runs did not start from the same weights"
    )
    assert "the loss differs by 50%" in parity_compare.problems(other, 1e-3)[-1]


def test_an_override_that_cannot_keep_the_batch_is_refused_as_update_refuses_it(spec, tmp_path):
    """One rule moves a batch (update's): micro 3 cannot keep global 8 on one process, and the
    refusal is update's own (exit 1), with the nearest global batches and the micro-batches
    that keep it."""
    result = run("smoke", spec, "--parity", "micro=3", "--workdir", tmp_path / "w")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("batchspec: error: --parity micro=3: cannot keep the batch")
    assert "nearest are 6 (accumulation 2) and 9 (accumulation 3)" in result.output
    assert "or keep global 8 with micro-batch 8, 4, 2, 1" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "w" / "a").exists()  # nothing was run


@pytest.mark.parametrize(
    "override, message",
    [
        ("tp=2", "--parity tp=2: 'tp=2' is not an override; give a second file, or micro=N"),
        ("micro=0", "--parity micro=0: micro must be a whole number ≥ 1, not '0'"),
    ],
)
def test_an_override_that_is_not_one_is_a_one_line_input_error(spec, tmp_path, override, message):
    result = run("smoke", spec, "--parity", override, "--workdir", tmp_path / "w")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (tmp_path / "w" / "a").exists()  # nothing was run


def test_a_second_file_with_another_global_batch_is_refused(spec, tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text("global_batch_size: 16\nmicro_batch_size: 4\n")
    result = run("smoke", spec, "--parity", other, "--workdir", tmp_path / "w")
    assert result.exit_code == 2
    assert "gives global batch 16" in result.output and "same batch" in result.output


def test_tolerance_needs_parity(spec):
    result = run("smoke", spec, "--tolerance", "0.1", "--dry-run")
    assert result.exit_code == 2 and "--tolerance is for --parity" in result.output


def test_an_engine_without_parity_and_a_model_parallel_layout_are_refused(tmp_path):
    path = tmp_path / "pp.yaml"
    path.write_text(SPEC + "world_size: 2\npipeline_parallel_size: 2\n")
    result = run(
        "smoke", path, "--framework", "deepspeed", "--nproc-per-node", 2, "--parity", "micro=2"
    )
    assert result.exit_code == 2
    assert "parity runs data parallelism only" in result.output


def test_slurm_dry_run_shows_both_jobs(spec, tmp_path, fake_sinfo):
    result = run(
        "smoke",
        spec,
        "--parity",
        "micro=2,nproc=1",
        "--nproc-per-node",
        2,
        "--slurm",
        "--device",
        "cpu",
        "--dry-run",
        "--json",
        "--workdir",
        tmp_path / "w",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    a, b = out["a"], out["b"]
    assert (a["micro_batch_size"], a["gradient_accumulation_steps"], a["world_size"]) == (4, 1, 2)
    assert (b["micro_batch_size"], b["gradient_accumulation_steps"], b["world_size"]) == (2, 4, 1)
    for side, ranks in ((a, 2), (b, 1)):
        assert (
            "--parity" in side["command"]
            and side["command"][side["command"].index("--steps") + 1] == "1"
        )
        assert f"--nproc_per_node {ranks}" in side["sbatch"] and side["submit"][0] == "sbatch"


# Real runs -------------------------------------------------------------------------------------


def test_two_splits_of_one_batch_train_the_same_step_on_the_torch_engine(spec, tmp_path):
    """On the job's model (the tiny Llama's config.json): B, a spec derived from A, builds the
    same model, from the same initial weights."""
    code, out, err = parity_json(
        spec,
        *("--nproc-per-node", 2, "--parity", "micro=2,nproc=1", "--workdir", tmp_path / "w"),
        *("--model-config", folder_with(tmp_path, "tiny-llama", TINY)),
    )
    assert code == 0, err
    assert out["a"]["model"]["parameters"] == out["b"]["model"]["parameters"] == 156_480
    assert out["parity"] is True and out["errors"] == []
    assert (out["a"]["data_parallel_size"], out["b"]["data_parallel_size"]) == (2, 1)
    assert out["a"]["samples_per_optimizer_step"] == out["b"]["samples_per_optimizer_step"] == [8]
    diff = out["difference"]
    assert diff["same_initial_weights"]
    assert diff["update"]["largest"]["relative_difference"] < out["tolerance"] == 1e-3
    assert diff["loss"]["relative_difference"] < 1e-5


def test_a_loss_normalised_per_micro_batch_fails_parity(spec, tmp_path):
    """The HF Trainer's bug before 4.46, made on purpose in the torch engine."""
    import os

    env = os.environ | {parity_rank.PER_MICRO_MEAN_ENV: "1"}
    code, out, err = parity_json(spec, "--parity", "micro=1", "--workdir", tmp_path / "w", env=env)
    assert code == 1, err
    assert out["parity"] is False
    name = out["difference"]["update"]["largest"]["parameter"]
    assert out["difference"]["update"]["largest"]["relative_difference"] > 0.05
    assert f"the update of {name} differs by" in out["errors"][0]
    assert "parity fails: the update of" in err


@pytest.mark.framework
def test_parity_under_slurm_runs_both_jobs_on_the_cluster(spec, tmp_path, slurm_cluster):
    code, out, err = parity_json(
        spec,
        "--nproc-per-node",
        2,
        "--parity",
        "micro=2,nproc=1",
        "--slurm",
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
        "--timeout",
        240,
    )
    assert code == 0, err
    a, b = out["a"], out["b"]
    assert a["slurm_job"] and b["slurm_job"] and a["slurm_job"] != b["slurm_job"]
    assert (a["world_size"], b["world_size"], b["gradient_accumulation_steps"]) == (2, 1, 4)
    assert a["samples_per_optimizer_step"] == b["samples_per_optimizer_step"] == [8]
    assert out["difference"]["update"]["largest"]["relative_difference"] < 1e-3


@pytest.mark.framework
def test_a_wrong_normalisation_fails_parity_under_slurm(spec, tmp_path, slurm_cluster):
    """The job's ranks get the launcher's environment, the deliberate bug's switch with it."""
    import os

    env = os.environ | {parity_rank.PER_MICRO_MEAN_ENV: "1"}
    code, out, err = parity_json(
        spec,
        "--parity",
        "micro=1",
        "--slurm",
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
        "--timeout",
        240,
        env=env,
    )
    assert code == 1, err
    assert out["a"]["slurm_job"] and out["b"]["slurm_job"]
    assert out["difference"]["update"]["largest"]["relative_difference"] > 0.05
    assert "parity fails: the update of" in err


def old_transformers() -> Path:
    """A venv with transformers 4.45.2 and its dependencies, on top of the running one (a .pth
    to its site-packages), built once and kept under .pytest_cache, keyed by the versions."""
    key = "-".join(f"{k}{v}" for k, v in OLD_TRANSFORMERS.items())
    folder = ROOT / ".pytest_cache" / "venvs" / key
    python = folder / "bin" / "python"
    if (folder / "ready").exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", folder], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = folder / "lib" / version / "site-packages"
    below = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "running-venv.pth").write_text("\n".join(below) + "\n")
    wanted = [f"{k}=={v}" for k, v in OLD_TRANSFORMERS.items()]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, *wanted],
        check=True,
    )
    (folder / "ready").write_text("")
    return python


@pytest.mark.framework
def test_parity_catches_the_accumulation_bug_of_transformers_4_45_2(spec, tmp_path):
    import os

    python = old_transformers()
    found = subprocess.run(
        [python, "-c", "import transformers; print(transformers.__version__)"],
        capture_output=True,
        text=True,
    )
    assert found.stdout.strip() == "4.45.2", found.stderr
    one = tmp_path / "one.yaml"
    one.write_text("global_batch_size: 8\nmicro_batch_size: 8\nsequence_length: 32\n")
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    code, out, err = parity_json(
        one,
        "--framework",
        "hf",
        "--parity",
        "micro=2",
        "--workdir",
        tmp_path / "w",
        python=python,
        env=env,
    )
    assert code == 1, err
    largest = out["difference"]["update"]["largest"]
    assert largest["relative_difference"] > 0.1  # measured: 30% of the update
    assert f"the update of {largest['parameter']} differs by" in err
    # the known cause, with the release that fixes it
    assert "known cause: the HF Trainer of transformers 4.45.2" in err
    assert out["causes"] and "4.46 or later" in out["causes"][0]["hint"]


@pytest.mark.framework
def test_parity_holds_on_the_hf_trainer_that_fixed_it(tmp_path):
    one = tmp_path / "one.yaml"
    one.write_text("global_batch_size: 8\nmicro_batch_size: 8\nsequence_length: 32\n")
    code, out, err = parity_json(
        one, "--framework", "hf", "--parity", "micro=2", "--workdir", tmp_path / "w"
    )
    assert code == 0, err
    assert out["difference"]["update"]["largest"]["relative_difference"] < 1e-3


@pytest.mark.framework
def test_deepspeed_accumulation_and_data_parallelism_train_the_same_step(spec, tmp_path):
    code, out, err = parity_json(
        spec,
        "--framework",
        "deepspeed",
        "--nproc-per-node",
        2,
        "--parity",
        "micro=1,nproc=1",
        "--workdir",
        tmp_path / "w",
    )
    assert code == 0, err
    assert out["b"]["gradient_accumulation_steps"] == 8
    assert out["difference"]["update"]["largest"]["relative_difference"] < 1e-3


MEGATRON_ARGS = """BATCH_ARGS=(
    --micro-batch-size 4
    --global-batch-size 8
    --seq-length 32
{extra})
"""


@pytest.mark.framework
@pytest.mark.parametrize("per_token, holds", [(True, True), (False, False)])
def test_megatron_needs_the_per_token_loss_for_padded_samples(tmp_path, per_token, holds):
    """Without --calculate-per-token-loss, megatron-core divides each micro-batch's loss by its
    own tokens and averages the micro-batches: splits of one padded batch train differently."""
    args = tmp_path / "megatron.sh"
    args.write_text(MEGATRON_ARGS.format(extra="    --calculate-per-token-loss\n" * per_token))
    code, out, err = parity_json(
        args, "--nproc-per-node", 2, "--parity", "micro=1,nproc=1", "--workdir", tmp_path / "w"
    )
    assert out["b"]["gradient_accumulation_steps"] == 8, err
    assert out["difference"]["same_initial_weights"]
    largest = out["difference"]["update"]["largest"]["relative_difference"]
    if holds:
        assert code == 0 and largest < 1e-3, err
        assert out["causes"] == []
    else:
        assert code == 1 and largest > 0.5, err
        assert "known cause: without --calculate-per-token-loss" in err
        assert "add --calculate-per-token-loss" in out["causes"][0]["hint"]


BRIDGE = """train:
  global_batch_size: 8
  micro_batch_size: {micro}
model:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  context_parallel_size: 1
{extra}dataset:
  seq_length: 32
"""


@pytest.mark.framework
@pytest.mark.parametrize(
    "per_token, parity, accumulation, holds",
    [(True, "micro=1,nproc=1", 8, True), (False, "b.yaml", 4, False)],
)
def test_megatron_bridge_needs_its_per_token_loss_for_padded_samples(
    tmp_path, per_token, parity, accumulation, holds
):
    """Megatron-Bridge's model.calculate_per_token_loss (default false) is megatron-core's
    switch: off, each micro-batch's loss is divided by its own tokens. B is A with overrides,
    or a second file (micro-batch 1 on A's two ranks)."""
    extra = "  calculate_per_token_loss: true\n" * per_token
    a = tmp_path / "a.yaml"
    a.write_text(BRIDGE.format(micro=4, extra=extra))
    (tmp_path / "b.yaml").write_text(BRIDGE.format(micro=1, extra=extra))
    other = parity if "=" in parity else tmp_path / parity
    code, out, err = parity_json(
        a, "--nproc-per-node", 2, "--parity", other, "--workdir", tmp_path / "w"
    )
    assert out["a"]["framework"] == out["b"]["framework"] == "megatron-bridge", err
    assert out["b"]["gradient_accumulation_steps"] == accumulation
    assert out["a"]["samples_per_optimizer_step"] == out["b"]["samples_per_optimizer_step"] == [8]
    assert out["difference"]["same_initial_weights"]
    largest = out["difference"]["update"]["largest"]["relative_difference"]
    if holds:
        assert code == 0 and largest < 1e-3, err
    else:
        assert code == 1 and largest > 0.5, err
        assert "parity fails: the update of" in err
        assert "set model.calculate_per_token_loss: true" in err


def _axolotl_drops_the_loss_kwargs() -> bool:
    """Whether Axolotl's trainer turns the HF Trainer's token-count normalisation off for a
    model whose forward does not name ``num_items_in_batch`` (a Llama's does not): the HF
    Trainer then divides each micro-batch by its own tokens and by the accumulation."""
    import inspect

    from axolotl.core.trainers.base import AxolotlTrainer

    return "self.model_accepts_loss_kwargs = False" in inspect.getsource(AxolotlTrainer.__init__)


@pytest.mark.framework
def test_parity_on_axolotl_with_packing_compares_the_same_samples_in_packed_rows(tmp_path):
    """With sample_packing, Axolotl's multipack sampler fills micro-batches of packed rows of
    sequence_len tokens: both splits feed 8 rows, counted sample by sample (and checked against
    the sampler's own bins), and with the engine's seed both steps hold the same samples (their
    fingerprints agree; unseeded, Axolotl shuffled the dataset anew each run: 25 against 24).
    Axolotl 0.19.0 turns the HF Trainer's fix of 4.46 back off for Llama (AxolotlTrainer's
    __init__ sets model_accepts_loss_kwargs False when the inner model's forward does not name
    num_items_in_batch): each micro-batch's loss is its own mean, which shows in the update,
    2.3 % here with packed rows nearly full (6.3 % unpacked), and is named as the cause. One
    run proves both: it was two launches of Axolotl pairs, 185 s of CI."""
    packed = tmp_path / "packed.yaml"
    packed.write_text(
        "base_model: tiny\nmicro_batch_size: 4\ngradient_accumulation_steps: 2\n"
        "sequence_len: 64\nsample_packing: true\n"
    )
    code, out, err = parity_json(
        packed, "--parity", "micro=2", "--model", "tiny", "--workdir", tmp_path / "w", timeout=1200
    )
    assert out is not None, err
    held = set()
    for side in "ab":
        assert out[side]["packed_rows_per_optimizer_step"] == [8], err
        (samples,) = out[side]["samples_per_optimizer_step"]
        assert samples > 8  # a packed row holds several samples
        held.add(samples)
    assert len(held) == 1 and out["difference"]["different_samples"] is None, err
    largest = out["difference"]["update"]["largest"]["relative_difference"]
    assert out["difference"]["same_initial_weights"], err
    if _axolotl_drops_the_loss_kwargs():
        assert code == 1 and largest > 5e-3, err
        assert "known cause: Axolotl's trainer" in err
    else:
        assert code == 0 and largest < 1e-3, err


def torchtune_config(folder: Path, name: str, micro: int, accumulation: int, data: str = ""):
    """A torchtune recipe config of the batch (``data``: its ``dataset`` section, whose
    component decides how the parity samples are labelled)."""
    path = folder / name
    path.write_text(f"batch_size: {micro}\ngradient_accumulation_steps: {accumulation}\n{data}")
    return path


@pytest.mark.framework
@pytest.mark.native
def test_torchtunes_recipe_trains_the_same_step_on_two_splits_of_sft_samples(tmp_path):
    """full_finetune_distributed sums each micro-batch's loss times its unmasked labels and
    scales the gradients by world ÷ the step's labels on all ranks: micro 4 × 2 FSDP ranks and
    micro 1 × accumulation 8 on one rank train the same step (an SFT dataset masks the BOS)."""
    import torchtune  # noqa: F401  (the native venv's)

    config = torchtune_config(tmp_path, "torchtune.yaml", 4, 1)
    code, out, err = parity_json(
        config,
        *("--nproc-per-node", 2, "--device", "cpu", "--seq-len", 32),
        *("--parity", "micro=1,nproc=1", "--workdir", tmp_path / "w"),
    )
    assert code == 0, err
    assert out["b"]["gradient_accumulation_steps"] == 8 and out["a"]["stepped_by"] == "SGD"
    diff = out["difference"]
    assert diff["same_initial_weights"]
    assert diff["update"]["largest"]["relative_difference"] < 1e-3  # measured: 4.2e-5


def _torchtune_counts_before_the_shift() -> bool:
    """Whether the installed recipe counts a micro-batch's unmasked labels before it shifts
    them (0.6.1 shifts in the recipe, through ``ignore_labels_cache``; main shifts them in the
    dataset, so what it counts is what its loss predicts)."""
    import inspect

    from translator.frameworks.torchtune.verdict import recipe_module

    recipe = recipe_module().FullFinetuneRecipeDistributed
    return "ignore_labels_cache" in inspect.getsource(recipe.train)


@pytest.mark.framework
@pytest.mark.native
def test_torchtune_0_6_1_weighs_micro_batches_by_a_label_its_loss_never_predicts(tmp_path):
    """A text-completion dataset labels the BOS too; torchtune 0.6.1's recipe counts it (its
    labels are counted before the shift drops the first) but its loss never predicts it, so
    each micro-batch's mean is weighted by (labels) / (labels − rows): micro 8 × 1 and 1 × 8 of
    the same samples train differently (measured: 12.9% of the update)."""
    data = "dataset:\n  _component_: torchtune.datasets.text_completion_dataset\n"
    one = torchtune_config(tmp_path, "one.yaml", 8, 1, data)
    eight = torchtune_config(tmp_path, "eight.yaml", 1, 8, data)
    code, out, err = parity_json(
        one, "--device", "cpu", "--seq-len", 32, "--parity", eight, "--workdir", tmp_path / "w"
    )
    assert out["difference"]["same_initial_weights"], err
    assert out["b"]["gradient_accumulation_steps"] == 8
    largest = out["difference"]["update"]["largest"]
    if _torchtune_counts_before_the_shift():
        assert code == 1 and largest["relative_difference"] > 0.05, err
        assert f"the update of {largest['parameter']} differs by" in err
        assert "known cause: torchtune 0.6.1's recipe counts" in err
    else:
        assert code == 0 and largest["relative_difference"] < 1e-3, err


def torchtitan_launch(folder: Path, micro: int, world: int) -> Path:
    """torchtitan's launch of global batch 8 (``render --to torchtitan``), in ``folder``."""
    spec = folder / "spec.json"
    spec.write_text(
        json.dumps({"global_batch_size": 8, "micro_batch_size": micro, "world_size": world})
    )
    result = run("render", spec, "--to", "torchtitan", "--out", folder)
    assert result.exit_code == 0, result.output
    return folder / "torchtitan.sh"


def _torchtitan_sums_a_replicated_loss() -> bool:
    """Whether torchtitan's loss reduction takes a DTensor loss's local part and sums it over
    the ranks (0.3.0's ``_dist_reduce_tensor``): under ``spmd_backend full_dtensor`` the loss is
    already the whole batch's (Replicate) on every rank, so it logs data-parallel × the loss."""
    import inspect

    from torchtitan.distributed import utils

    return "x = x.to_local()" in inspect.getsource(utils._dist_reduce_tensor)


@pytest.mark.framework
@pytest.mark.native
def test_torchtitans_trainer_trains_the_same_step_on_two_splits_and_logs_a_loss_per_rank(tmp_path):
    """torchtitan's train_step divides each micro-batch's summed loss by the labels of the whole
    step on all ranks: micro 4 on 2 ranks and micro 1 × accumulation 8 on one rank train the
    same step, but the loss it logs on 2 CPU ranks (full_dtensor, its only backend there) is
    twice the loss. (One parity run: each launch of its Trainer costs about a minute here.)"""
    (tmp_path / "a").mkdir()
    torchtitan_launch(tmp_path / "a", 4, 2)
    a = tmp_path / "a" / "torchtitan.sh"
    common = ("--device", "cpu", "--seq-len", 32, "--nproc-per-node", 2)
    code, out, err = parity_json(
        a, *common, "--parity", "micro=1,nproc=1", "--workdir", tmp_path / "w"
    )
    assert out["b"]["gradient_accumulation_steps"] == 8 and out["a"]["stepped_by"] == "SGD"
    assert out["difference"]["same_initial_weights"]
    assert out["difference"]["update"]["largest"]["relative_difference"] < 1e-3, err
    loss = out["difference"]["loss"]
    if _torchtitan_sums_a_replicated_loss():
        assert code == 1 and loss["a"] == pytest.approx(2 * loss["b"], rel=1e-4), err
        assert "parity fails: the loss differs by 50%" in err
    else:
        assert code == 0, err
