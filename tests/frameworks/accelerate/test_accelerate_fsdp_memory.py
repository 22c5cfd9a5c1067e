"""An accelerate config that launches FSDP (``distributed_type: FSDP`` with ``fsdp_config``)
shards the model states in the estimate, as the plugin does: FSDP1's sharding strategy, FSDP2's
``fsdp_reshard_after_forward``, parameter offload and activation checkpointing. It was ignored:
8B on 8 GPUs counted unsharded, 146 GiB a GPU, where FULL_SHARD gives 28."""

import pytest
from run_batchspec import run_json

JOB = (
    "#!/bin/bash\naccelerate launch --config_file acc.yaml train.py "
    "--per_device_train_batch_size 1 --gradient_accumulation_steps 4 --bf16 --output_dir o\n"
)
HEAD = "compute_environment: LOCAL_MACHINE\nnum_machines: 1\nnum_processes: 8\n"


def estimate(tmp_path, monkeypatch, config: str) -> dict:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(HEAD + config)
    (tmp_path / "train.sh").write_text(JOB)
    result, out = run_json("estimate", "train.sh", "--model", "llama3-8b", "--seq-len", 2048)
    assert result.exit_code in (0, 1), result.output
    return out


@pytest.mark.parametrize(
    "config, stage",
    [
        ("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n", 3),
        ("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: 2\n", 2),
        ("distributed_type: FSDP\n", 3),  # accelerate's default strategy
        (
            "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n"
            "  fsdp_reshard_after_forward: false\n",
            2,
        ),
        ("distributed_type: MULTI_GPU\n", 0),
    ],
)
def test_the_zero_stage_is_the_one_fsdp_shards_like(tmp_path, monkeypatch, config, stage):
    out = estimate(tmp_path, monkeypatch, config)
    assert out["zero_stage"] == stage
    if stage:
        assert any("distributed_type FSDP" in s["where"] for s in out["settings"])


def test_full_shard_divides_the_model_states_by_the_data_parallel_ranks(tmp_path, monkeypatch):
    sharded = estimate(tmp_path, monkeypatch, "distributed_type: FSDP\n")
    plain = estimate(tmp_path, monkeypatch, "distributed_type: MULTI_GPU\n")
    assert sharded["total_bytes"] < plain["total_bytes"] / 4


def test_offload_and_checkpointing_are_read(tmp_path, monkeypatch):
    out = estimate(
        tmp_path,
        monkeypatch,
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: true\n"
        "  fsdp_activation_checkpointing: true\n",
    )
    assert out["offload"] and out["recompute"] == "full"
