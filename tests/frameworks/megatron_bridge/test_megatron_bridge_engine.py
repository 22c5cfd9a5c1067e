"""Megatron-Bridge's smoke engine runs the rendered ConfigContainer overrides through
megatron-core's own parts on CPU and counts each optimizer step's samples; megatron-core's
calculator, asked as Megatron-Bridge asks it, agrees with every rendered file."""

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from paths import ROOT
from strategies import specs

from translator.cli import main
from translator.frameworks import FRAMEWORKS
from translator.frameworks.megatron_bridge import engine
from translator.render import render
from translator.spec import BatchSpec

pytestmark = pytest.mark.framework
MB = FRAMEWORKS["megatron-bridge"]
TINY = ROOT / "fixtures" / "megatron_bridge" / "valid" / "tiny_llama_model_block.yaml"


def rendered(spec: BatchSpec, folder) -> str:
    out = render(spec, MB)
    path = folder / out.filename
    path.write_text(out.text)
    return str(path)


@settings(max_examples=300, deadline=None)
@given(specs(pipeline=True))
def test_megatron_core_runs_the_rendered_number_of_microbatches(spec):
    from translator.frameworks.shared.mcore_calculator import calculate

    layout = engine.parse_layout(render(spec, MB).text, MB.filename)
    dp = spec.world_size // (
        layout.tensor_parallel_size * layout.pipeline_parallel_size * layout.context_parallel_size
    )
    got = calculate(layout.global_batch_size, layout.micro_batch_size, dp)
    assert got.num_microbatches == spec.gradient_accumulation_steps
    assert got.running_global_batch_size == spec.global_batch_size


def test_two_ranks_count_the_global_batch_of_the_jobs_model_and_expect_global_can_fail(
    tmp_path,
):
    """The file's own model, issue 27's tiny Llama written as its model block, built by
    megatron-core as a TransformerConfig: 156,480 parameters counted on the built model (the
    stand-in, a GPT-style model of another shape, ran before)."""
    args = ["smoke", str(TINY), "--nproc-per-node", "2", "--device", "cpu", "--steps", "2"]
    args += ["--workdir", str(tmp_path / "work"), "--expect-global", "16", "--json"]
    result = CliRunner().invoke(main, args)
    out = json.loads(result.stdout)
    assert result.exit_code == 1
    assert out["framework"] == "megatron-bridge" and out["samples_per_optimizer_step"] == [8, 8]
    assert out["errors"] == [
        "megatron-bridge consumed 8 samples per optimizer step, not the 16 expected (--expect-global)"
    ]
    assert out["model"]["parameters"] == 156_480 and out["model"]["stand_in"] is False
    assert out["model"]["source"] == f"{TINY}: model block"


def test_a_layout_cpu_cannot_run_is_refused_before_any_rank_starts(tmp_path):
    spec = BatchSpec(global_batch_size=8, micro_batch_size=1, world_size=2, tensor_parallel_size=2)
    config = rendered(spec, tmp_path)
    result = CliRunner().invoke(
        main,
        ["smoke", config, "--nproc-per-node", "2", "--device", "cpu", "--workdir", str(tmp_path)],
    )
    assert (
        result.exit_code == 2 and "tensor-parallel smoke runs (tensor 2) need GPUs" in result.stderr
    )
    assert not list(tmp_path.glob("**/rank*"))


def test_the_layout_is_read_back_from_the_rendered_file(tmp_path):
    text = render(BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8), MB).text
    layout = engine.parse_layout(text + "ddp:\n  use_distributed_optimizer: true\n", "x.yaml")
    assert (
        layout.global_batch_size,
        layout.micro_batch_size,
        layout.use_distributed_optimizer,
    ) == (64, 2, True)
    assert "ddp.use_distributed_optimizer needs GPUs" in engine.refuse_config(
        text + "ddp:\n  use_distributed_optimizer: true\n", None, "x.yaml", "cpu"
    )
    with pytest.raises(RuntimeError, match="x.yaml: train.rampup_batch_size is not supported"):
        engine.parse_layout(
            text.replace("train:\n", "train:\n  rampup_batch_size: [8, 8, 100]\n"), "x.yaml"
        )


def test_the_per_token_loss_is_read_as_bridge_reads_it():
    # Bridge's GPTModelProvider keeps megatron-core's TransformerConfig default.
    from megatron.core.transformer.transformer_config import TransformerConfig

    default = TransformerConfig.__dataclass_fields__["calculate_per_token_loss"].default
    text = render(BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2), MB).text
    assert engine.parse_layout(text, "x.yaml").calculate_per_token_loss is default is False
    on = text.replace("model:\n", "model:\n  calculate_per_token_loss: true\n")
    assert engine.parse_layout(on, "x.yaml").calculate_per_token_loss is True
    wrong = text.replace("model:\n", "model:\n  calculate_per_token_loss: 'yes'\n")
    line = wrong.splitlines().index("  calculate_per_token_loss: 'yes'") + 1
    assert engine.refuse_config(wrong, None, "x.yaml", "cpu") == (
        f"x.yaml:{line}: model.calculate_per_token_loss is 'yes', not true or false"
    )
