"""The guard inside a real job: a real transformers Trainer run whose batch is wrong stops at
step 1 naming both numbers; a right one runs on. The plain-PyTorch helper sums over ranks."""

import os
import subprocess
import sys
import textwrap

import pytest
from paths import ROOT

from translator.guard import BatchGuard, BatchMismatch


def test_importing_the_guard_needs_no_framework():
    code = (
        "import sys; import translator.guard; "
        "assert not {'torch', 'transformers', 'click', 'jinja2'} & set(sys.modules), "
        "sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'torch', 'transformers', 'click', 'jinja2'})"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        BatchGuard(global_batch_size=0)


def trainer(tmp_path, guard, per_device=4, accumulation=2, steps=3):
    transformers = pytest.importorskip("transformers")
    import torch

    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=128, n_positions=16)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 128, (64, 16)).unbind(0)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation,
        max_steps=steps,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    return transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[guard])


@pytest.mark.framework
def test_a_trainer_with_the_right_batch_runs_on(tmp_path):
    guard = BatchGuard(global_batch_size=8, steps=2)
    run = trainer(tmp_path, guard)
    run.train()
    assert guard.checked == [8, 8] and run.state.global_step == 3


@pytest.mark.framework
def test_a_trainer_with_the_wrong_batch_stops_at_step_1(tmp_path):
    guard = BatchGuard(global_batch_size=16, steps=2)
    run = trainer(tmp_path, guard)
    with pytest.raises(
        BatchMismatch,
        match="optimizer step 1 consumed 8 samples over 1 "
        r"process\(es\), but the global batch should be 16; "
        "likely cause: 2× too few",
    ):
        run.train()
    assert run.state.global_step == 1 and guard.checked == [8]


SCRIPT = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    from translator.guard import BatchGuard, BatchMismatch
    dist.init_process_group("gloo")
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    guard = BatchGuard(global_batch_size=int(sys.argv[1]), steps=2)
    guard.watch(opt)
    loader = guard.count(torch.randn(3, 4) for _ in range(100))   # 3 rows a batch
    try:
        for step in range(3):
            for _ in range(2):                                      # accumulation 2
                net(next(loader)).sum().backward()
            opt.step(); opt.zero_grad()
        outcome = f"ran {guard.checked}"
    except BatchMismatch as exc:
        outcome = f"stopped {exc}"
    with open(f"{sys.argv[2]}/rank{dist.get_rank()}.txt", "w") as out:
        out.write(outcome)
    dist.barrier()  # gloo aborts a rank whose peer tore the group down first
    dist.destroy_process_group()
""")


@pytest.mark.framework
@pytest.mark.parametrize(
    "expected, outcome",
    [
        (12, "ran [12, 12]"),
        (24, "stopped BatchGuard: optimizer step 1 consumed 12 samples over 2 process(es)"),
    ],
)
def test_the_plain_pytorch_helper_sums_over_ranks(tmp_path, expected, outcome):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(script),
            str(expected),
            str(tmp_path),
        ],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for rank in (0, 1):  # both ranks agree
        assert (tmp_path / f"rank{rank}.txt").read_text().startswith(outcome)
