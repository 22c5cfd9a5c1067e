"""What each rank of an HF Trainer job under DeepSpeed AutoTP is given, from the frameworks' own
code: ``python tests/frameworks/hf/autotp_ranks.py WORLD DS_JSON PER_DEVICE ACCUMULATION`` prints one JSON
object per rank.

Every rank is built in turn in this one process, in a process group of the ``fake`` backend
(torch's, for tests: the ranks and groups are real, no collective runs), so the real
TrainingArguments, Trainer, accelerate data loader and DeepSpeed groups decide: the Trainer's
data loader as accelerate prepares it, the DeepSpeed config as the Trainer fills it and as
DeepSpeed checks it against the world it counts, and the tensor-parallel group DeepSpeed puts the
rank in (``_init_tp_mesh_device``, which ``deepspeed.initialize`` calls for the HF Trainer).
Run it as its own process: it leaves process-group and accelerate state behind.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import deepspeed  # noqa: E402

deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # no C++ build for a CPU run
import torch  # noqa: E402
import torch.distributed as torch_dist  # noqa: E402
from accelerate.state import AcceleratorState, PartialState  # noqa: E402
from deepspeed.runtime.config import DeepSpeedConfig  # noqa: E402
from deepspeed.utils import groups  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402


class Rows(torch.utils.data.Dataset):
    """Samples that are their own index, so a batch shows which samples a rank drew."""

    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> dict:
        return {"x": torch.tensor([float(i)])}


def one_rank(rank: int, world: int, config: dict, per_device: int, accumulation: int) -> dict:
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), ACCELERATE_USE_DEEPSPEED="true"
    )
    torch_dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
    deepspeed.comm.init_distributed(dist_backend="fake", auto_mpi_discovery=False)
    # What torchrun would give accelerate: the launched ranks (it finds no GPU backend here).
    PartialState(backend="fake")
    args = TrainingArguments(
        tempfile.mkdtemp(),
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation,
        deepspeed=json.loads(json.dumps(config)),
        accelerator_config={"use_configured_state": True},
        remove_unused_columns=False,
        report_to="none",
    )
    trainer = Trainer(model=torch.nn.Linear(1, 1), args=args, train_dataset=Rows())
    loader = trainer.get_train_dataloader()
    batches = [[int(v) for v in b["x"].flatten()] for _, b in zip(range(2), loader, strict=False)]
    filled = args.hf_deepspeed_config.config
    counted = DeepSpeedConfig(json.loads(json.dumps(filled)))  # no mpu: the Trainer passes none
    tp = filled.get("tensor_parallel", {}).get("autotp_size", 1)
    groups._TENSOR_MODEL_PARALLEL_GROUP = groups._DATA_PARALLEL_GROUP = None
    groups._MODEL_PARALLEL_GROUP = None
    groups._init_tp_mesh_device(tensor_model_parallel_size=tp)
    out = {
        "rank": rank,
        "batches": batches,
        "accelerate_processes": trainer.accelerator.num_processes,
        "trainer_total_train_batch_size": trainer.get_total_train_batch_size(args),
        "filled_train_batch_size": filled["train_batch_size"],
        "deepspeed_world_size": counted.world_size,
        "deepspeed_train_batch_size": counted.train_batch_size,
        "tensor_parallel_group": torch_dist.get_process_group_ranks(
            groups.get_tensor_model_parallel_group()
        ),
        "data_parallel_size": groups.get_data_parallel_world_size(),
    }
    AcceleratorState._reset_state(reset_partial_state=True)
    torch_dist.destroy_process_group()
    return out


def main() -> None:
    world, path, per_device, accumulation = sys.argv[1:5]
    with open(path) as f:
        config = json.load(f)
    for rank in range(int(world)):
        print(json.dumps(one_rank(rank, int(world), config, int(per_device), int(accumulation))))


if __name__ == "__main__":
    main()
