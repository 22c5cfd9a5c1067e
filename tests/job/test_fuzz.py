"""Readers never crash: random bytes and mutated configs give a result or a one-line error."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from translator.frameworks import FRAMEWORKS
from translator.inspection import inspect_reading
from translator.reading import Launch
from translator.words.errors import BatchspecError

SEEDS = {
    "deepspeed": '{\n  "train_batch_size": 64,\n  "train_micro_batch_size_per_gpu": 2,\n'
    '  "gradient_accumulation_steps": "auto",\n  "zero_optimization": {"stage": 2},\n'
    '  "tensor_parallel": {"autotp_size": 2}, "sequence_parallel_size": 1\n}\n',
    "axolotl": "base_model: x  # c\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n"
    "batch_size: 8\nsequence_len: 2048\nsample_packing: true\ntensor_parallel_size: 2\n"
    "deepspeed: ds.json\ndatasets:\n  - path: a\n    type: alpaca\n",
    "megatron": "GPUS=${GPUS:-8}\nMBS=2\nARGS=(\n  --micro-batch-size $MBS\n"
    '  --global-batch-size $((MBS*32)) --tensor-model-parallel-size "2"\n)\n'
    "torchrun --nproc_per_node $GPUS --nnodes 2 pretrain_gpt.py ${ARGS[@]} \\\n"
    "  --num-layers 8 --num-layers-per-virtual-pipeline-stage 2 "
    "--pipeline-model-parallel-size 2 --rampup-batch-size 16 16 100\n",
}
FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def survive(name, text, tmp_path=None):
    backend = FRAMEWORKS[name]
    try:
        inspect_reading(backend, backend.read(text, "fuzz"), Launch(8))
    except BatchspecError as exc:
        assert "\n" not in str(exc).strip()


@st.composite
def mutated(draw, seed):
    text = seed
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        chunk = draw(
            st.text(
                alphabet=st.sampled_from(list("{}[]()\"'$:=\\\n\t #-,0123456789ab@*")),
                min_size=1,
                max_size=4,
            )
        )
        if op == "insert":
            text = text[:pos] + chunk + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + len(chunk) :]
        elif op == "replace":
            text = text[:pos] + chunk + text[pos + len(chunk) :]
        else:
            text = text[:pos] + text[pos : pos + 40] * 2 + text[pos + 40 :]
    return text


@pytest.mark.parametrize("name", list(SEEDS))
@FAST
@given(data=st.data())
def test_mutated_configs_never_crash(name, data):
    survive(name, data.draw(mutated(SEEDS[name])))


@pytest.mark.parametrize("name", list(SEEDS))
@FAST
@given(text=st.text(max_size=300))
def test_random_text_never_crashes(name, text):
    survive(name, text)


@pytest.mark.parametrize("name", list(SEEDS))
def test_the_seeds_read_cleanly(name):
    backend = FRAMEWORKS[name]
    reading = backend.read(SEEDS[name], "seed")
    assert reading.values


@pytest.mark.parametrize("suffix", [".json", ".yml", ".sh", ".conf"])
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(content=st.binary(max_size=400))
def test_random_bytes_through_the_command_line(tmp_path, suffix, content):
    from click.testing import CliRunner

    from translator.cli import main

    path = tmp_path / f"random{suffix}"
    path.write_bytes(content)
    result = CliRunner().invoke(main, ["inspect", str(path), "--world-size", "8"])
    assert result.exit_code in (0, 1, 2)
    assert "Traceback" not in result.output and "internal error" not in result.output
    if result.exit_code == 2:
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("batchspec: error: ")
