"""The known causes of a failed parity (a loss normalised per micro-batch), named by inspect
before a run and by smoke --parity when it fails, each with the flag or release that fixes it."""

from types import SimpleNamespace

import pytest

from translator.frameworks.shared import loss
from translator.inspection import inspect_file
from translator.launch.parity_compare import known_causes
from translator.launch.request import RunRequest
from translator.reading import Launch

MEGATRON = "BATCH_ARGS=(\n    --micro-batch-size 4\n    --global-batch-size {g}\n{extra})\n"
BRIDGE = (
    "train:\n  global_batch_size: 16\n  micro_batch_size: 2\nmodel:\n"
    "  tensor_model_parallel_size: 1\n  pipeline_model_parallel_size: 1\n"
    "  context_parallel_size: 1\n{extra}"
)


def causes(path, world: int) -> list:
    found = inspect_file(str(path), launch=Launch(world_size=world))
    return [f for f in found.findings if f.code == "loss-normalisation"]


@pytest.mark.parametrize(
    "g, extra, world, named",
    [
        (16, "", 2, True),  # 2 micro-batches per step on each of 2 ranks
        (16, "    --calculate-per-token-loss\n", 2, False),
        (4, "", 1, False),  # one micro-batch a step: the split cannot matter
    ],
)
def test_megatron_without_the_per_token_loss_is_warned_about(tmp_path, g, extra, world, named):
    path = tmp_path / "megatron.sh"
    path.write_text(MEGATRON.format(g=g, extra=extra))
    found = causes(path, world)
    assert bool(found) is named
    if named:
        assert "--calculate-per-token-loss" in found[0].hint


@pytest.mark.parametrize(
    "extra, named", [("", True), ("  calculate_per_token_loss: true\n", False)]
)
def test_megatron_bridge_names_its_own_switch(tmp_path, extra, named):
    path = tmp_path / "bridge.yaml"
    path.write_text(BRIDGE.format(extra=extra))
    found = causes(path, 2)
    assert bool(found) is named
    if named:
        assert "model.calculate_per_token_loss: true" in found[0].hint


@pytest.mark.parametrize(
    "installed, named", [((4, 45, 2), True), ((4, 46, 0), False), (None, False)]
)
def test_the_hf_trainer_before_4_46_is_warned_about_under_accumulation(
    tmp_path, monkeypatch, installed, named
):
    monkeypatch.setattr(loss, "version", lambda package: installed)
    path = tmp_path / "args.yaml"
    path.write_text("per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\n")
    found = causes(path, 2)
    assert bool(found) is named
    if named:
        assert "transformers 4.45.2" in found[0].message and "4.46 or later" in found[0].hint
    path.write_text("per_device_train_batch_size: 4\ngradient_accumulation_steps: 1\n")
    assert not causes(path, 2)  # no accumulation: each micro-batch is the rank's whole step


def test_axolotl_under_accumulation_is_warned_about(tmp_path):
    path = tmp_path / "axolotl.yml"
    path.write_text("base_model: m\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n")
    (found,) = causes(path, 2)
    assert "model_accepts_loss_kwargs" in found.message and found.where.endswith(":3")
    path.write_text("base_model: m\nmicro_batch_size: 2\ngradient_accumulation_steps: 1\n")
    assert not causes(path, 2)


def test_a_failed_parity_names_each_known_cause_once():
    """What the parity report adds to a failure: the loss-normalisation findings of its runs
    (the two runs of one engine name the same cause once)."""
    from translator.words.findings import finding

    cause = finding("loss-normalisation", "each micro-batch on its own", hint="a flag", where="f")
    other = finding("lr-scaling", "not a cause", where="f")
    side = SimpleNamespace(prepared=SimpleNamespace(findings=[cause, other]))
    assert known_causes(side, side) == [{"message": cause.message, "hint": "a flag", "where": "f"}]


def test_a_spec_smoked_on_megatron_says_the_cause_before_it_runs(tmp_path):
    """The engine runs a config it renders for the spec (without the per-token loss)."""
    from translator.launch.preparing import prepare

    spec = tmp_path / "spec.yaml"
    spec.write_text("global_batch_size: 8\nmicro_batch_size: 2\nsequence_length: 32\n")
    prepared = prepare(RunRequest(str(spec), "megatron", 2, 1, 1, "tiny", None, tmp_path / "w"))
    assert any(f.code == "loss-normalisation" for f in prepared.findings)
