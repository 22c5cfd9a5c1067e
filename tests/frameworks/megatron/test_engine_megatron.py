"""The Megatron engine runs a rendered Megatron args file through megatron-core's own parts
(GPTModel, micro-batch calculator, forward-backward schedule, DDP and get_megatron_optimizer),
on CPU, and counts the samples each optimizer step consumes."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from translator.frameworks import FRAMEWORKS
from translator.rank import worker
from translator.rank.context import RunContext
from translator.rank.result import merge, read_all
from translator.render import render
from translator.spec import BatchSpec

pytest.importorskip("megatron.core")
from paths import ROOT

from translator.frameworks.megatron import engine  # noqa: E402

pytestmark = pytest.mark.framework


def rendered(spec: BatchSpec, folder: Path) -> tuple[Path, Path]:
    """The spec as JSON and as rendered Megatron args, written into ``folder``."""
    out = render(spec, FRAMEWORKS["megatron"])
    config = folder / out.filename
    config.write_text(out.text)
    spec_file = folder / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    return spec_file, config


def test_two_ranks_run_two_steps_of_the_rendered_global_batch(tmp_path):
    spec = BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2, sequence_length=32)
    assert spec.gradient_accumulation_steps == 2
    spec_file, config = rendered(spec, tmp_path)
    out = tmp_path / "results"
    out.mkdir()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "translator.rank.worker",
            "--engine",
            "megatron",
            "--spec",
            str(spec_file),
            "--config",
            str(config),
            "--out",
            str(out),
            "--steps",
            "2",
            "--model",
            "tiny",
            "--seq-len",
            "32",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = read_all(out)
    assert [r.error for r in results] == [None, None]
    assert [r.data_parallel_rank for r in results] == [0, 1]
    assert all(r.counts_samples for r in results)
    # 2 micro-batches of 2 on each of the 2 replicas, as the calculator decided.
    assert [r.samples_per_step for r in results] == [[4, 4], [4, 4]]
    assert all(r.parameters > 0 and r.device == "cpu" for r in results)
    measured = merge(results)
    assert measured.optimizer_steps == 2
    assert measured.samples_per_optimizer_step == [8, 8]


def context(spec: BatchSpec, tmp_path: Path) -> RunContext:
    spec_file, config = rendered(spec, tmp_path)
    return RunContext(
        spec=spec,
        config=config,
        workdir=tmp_path,
        steps=1,
        model="tiny",
        sequence_length=32,
        rank=0,
        local_rank=0,
        world_size=spec.world_size,
    )


def test_pipeline_parallel_is_refused_with_the_reason(tmp_path):
    spec = BatchSpec(
        global_batch_size=8,
        micro_batch_size=2,
        world_size=4,
        pipeline_parallel_size=2,
        sequence_length=32,
    )
    ctx = context(spec, tmp_path)
    layout = engine.read_layout(ctx.config)
    assert (layout.pipeline_parallel_size, layout.micro_batch_size, layout.global_batch_size) == (
        2,
        2,
        8,
    )
    with pytest.raises(RuntimeError, match="pipeline-parallel smoke runs .* need GPUs"):
        engine.run(ctx)  # refused before any process group is made
    engine.check_layout(layout, on_gpu=True)  # 1F1B on GPUs


def test_the_worker_reports_the_refusal(tmp_path, monkeypatch):
    spec = BatchSpec(
        global_batch_size=8,
        micro_batch_size=2,
        world_size=4,
        pipeline_parallel_size=2,
        sequence_length=32,
    )
    spec_file, config = rendered(spec, tmp_path)
    monkeypatch.setenv("RANK", "0")
    code = worker.main(
        [
            "--engine",
            "megatron",
            "--spec",
            str(spec_file),
            "--config",
            str(config),
            "--out",
            str(tmp_path),
            "--steps",
            "1",
            "--seq-len",
            "32",
        ]
    )
    assert code == 1
    [result] = read_all(tmp_path)
    assert result.error.startswith(
        "RuntimeError: pipeline-parallel smoke runs (pipeline 2) need GPUs"
    )


@pytest.mark.parametrize(
    "field, name", [("tensor_parallel_size", "tensor"), ("context_parallel_size", "context")]
)
def test_model_parallel_needs_gpus_on_cpu(tmp_path, field, name):
    spec = BatchSpec(
        global_batch_size=8, micro_batch_size=2, world_size=4, sequence_length=32, **{field: 2}
    )
    layout = engine.read_layout(context(spec, tmp_path).config)
    with pytest.raises(RuntimeError, match=f"{name}-parallel smoke runs .* need GPUs"):
        engine.check_layout(layout, on_gpu=False)
    if name == "context" and importlib.util.find_spec("transformer_engine") is None:
        with pytest.raises(RuntimeError, match="need Transformer Engine"):
            engine.check_layout(layout, on_gpu=True)
    else:
        engine.check_layout(layout, on_gpu=True)


def test_the_distributed_optimizer_needs_gpus(tmp_path):
    spec = BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2, sequence_length=32)
    _, config = rendered(spec, tmp_path)
    text = config.read_text().rstrip()
    assert text.endswith(")")
    config.write_text(text[:-1] + "    --use-distributed-optimizer\n)\n")
    layout = engine.read_layout(config)
    assert layout.use_distributed_optimizer
    with pytest.raises(RuntimeError, match="--use-distributed-optimizer needs GPUs"):
        engine.check_layout(layout, on_gpu=False)


def test_the_cuda_redirect_is_scoped_to_megatron_and_undone():
    import torch
    from megatron.core.distributed import param_and_grad_buffer
    from megatron.core.pipeline_parallel import schedules

    with engine._cpu_megatron():
        assert schedules.torch.zeros([], dtype=torch.int, device="cuda").device.type == "cpu"
        assert schedules.torch.ones(2, device="cuda").device.type == "cpu"
        assert param_and_grad_buffer.torch.cuda.current_device() == "cpu"
        assert schedules.torch.matmul is torch.matmul
        assert torch.zeros(1).device.type == "cpu"  # torch itself is untouched
    assert schedules.torch is torch and param_and_grad_buffer.torch is torch


def test_the_layout_comes_from_the_rendered_file_not_the_spec(tmp_path):
    spec = BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2)
    _, config = rendered(spec, tmp_path)
    config.write_text(config.read_text().replace("--micro-batch-size 2", "--micro-batch-size 4"))
    assert engine.read_layout(config).micro_batch_size == 4
    config.write_text(config.read_text().replace("--micro-batch-size 4", "--micro-batch-size $M"))
    with pytest.raises(RuntimeError, match="--micro-batch-size is not a literal count"):
        engine.read_layout(config)
