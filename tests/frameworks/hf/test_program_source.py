"""A Trainer program's own source is read for its batch (issue 34): the one TrainingArguments
(or TRL config) it builds, each batch keyword traced to a literal, an argparse default, an
environment variable or a TrainingArguments subclass's field; the job's flags and
environment win where the program reads them; anything computed stays unknown."""

from __future__ import annotations

import textwrap

import pytest
from run_batchspec import inspect

ARGPARSE = """
import argparse, os
from trl import SFTConfig
parser = argparse.ArgumentParser()
parser.add_argument("--model_id", default="m")
parser.add_argument("--batch-size", type=int, default=2)
parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
args = parser.parse_args()
accumulation = args.gradient_accumulation_steps
config = SFTConfig(
    output_dir="out",
    per_device_train_batch_size=args.batch_size,
    gradient_accumulation_steps=accumulation,
)
"""

ENVIRONMENT = """
import os
from transformers import TrainingArguments
micro = int(os.getenv("TRAIN_BATCH_SIZE", "1"))
args = TrainingArguments(output_dir="o", per_device_train_batch_size=micro)
"""

LITERAL = """
from transformers import TrainingArguments
args = TrainingArguments(output_dir="o", per_device_train_batch_size=4, gradient_accumulation_steps=2)
"""

SUBCLASS = """
from dataclasses import dataclass, field
import transformers
@dataclass
class TrainingArguments(transformers.TrainingArguments):
    per_device_train_batch_size: int = field(default=1)
    gradient_accumulation_steps: int = 4
parser = transformers.HfArgumentParser((TrainingArguments,))
"""

COMPUTED = """
import torch
from transformers import TrainingArguments
args = TrainingArguments(output_dir="o", per_device_train_batch_size=torch.cuda.device_count() * 2)
"""

SPREAD = """
from transformers import AutoModelForCausalLM, TrainingArguments
model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")
args = TrainingArguments(output_dir="o", per_device_train_batch_size=1)
"""


def job(tmp_path, program: str, launch: str):
    (tmp_path / "train.py").write_text(textwrap.dedent(program))
    path = tmp_path / "train.sh"
    path.write_text(f"#!/bin/bash\n{launch}\n")
    return path


@pytest.mark.parametrize(
    "program, launch, micro, accumulation",
    [
        (ARGPARSE, "torchrun --nproc_per_node 4 train.py --model_id x", 2, 4),
        (ARGPARSE, "torchrun --nproc_per_node 4 train.py --batch-size 8", 8, 4),
        (ENVIRONMENT, "torchrun --nproc_per_node 4 train.py", 1, 1),
        (ENVIRONMENT, "TRAIN_BATCH_SIZE=3 torchrun --nproc_per_node 4 train.py", 3, 1),
        # the program's literal wins over a flag it never reads into TrainingArguments
        (LITERAL, "torchrun --nproc_per_node 4 train.py --per_device_train_batch_size 16", 4, 2),
        (SUBCLASS, "torchrun --nproc_per_node 4 train.py --output_dir o", 1, 4),
        (SUBCLASS, "torchrun --nproc_per_node 4 train.py --per_device_train_batch_size 2", 2, 4),
    ],
)
def test_the_program_sets_its_batch_as_its_source_says(
    tmp_path, program, launch, micro, accumulation
):
    code, out = inspect(job(tmp_path, program, launch), exits=(0,))
    assert out["framework"] == "hf"
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (micro, accumulation)
    assert out["global_batch_size"] == micro * accumulation * 4


def test_a_computed_value_is_unknown_not_a_default(tmp_path):
    code, out = inspect(job(tmp_path, COMPUTED, "torchrun --nproc_per_node 2 train.py"))
    assert out["micro_batch_size"] is None and out["global_batch_size"] is None
    assert out["gradient_accumulation_steps"] == 1  # not given: TrainingArguments' own


def test_a_model_spread_over_the_gpus_leaves_dataparallel_unknown(tmp_path):
    """Plain python on 4 visible GPUs: DataParallel over them, unless the model is placed with
    device_map (spread over them, the Trainer runs none)."""
    launch = "CUDA_VISIBLE_DEVICES=0,1,2,3 python train.py"
    code, out = inspect(job(tmp_path, SPREAD, launch))
    assert out["world_size"] is None and out["global_batch_size"] is None
    code, out = inspect(job(tmp_path, LITERAL, launch))
    assert out["world_size"] == 4 and out["global_batch_size"] == 4 * 2 * 4


def test_a_program_that_builds_no_trainer_arguments_is_not_claimed(tmp_path):
    program = "import torch\nfor step in range(10):\n    pass\n"
    code, out = inspect(job(tmp_path, program, "torchrun --nproc_per_node 2 train.py"), exits=(2,))
    assert out["world_size"] == 2 and out["micro_batch_size"] is None


PARSER = """
from transformers import HfArgumentParser, TrainingArguments
from dataclasses import dataclass
@dataclass
class ModelArguments:
    model_name_or_path: str = "m"
parser = HfArgumentParser((ModelArguments, TrainingArguments))
model_args, training_args = parser.parse_args_into_dataclasses()
"""

FOREIGN_CLASS = """
from my_project.args import MyTrainingArguments
args = MyTrainingArguments(output_dir="o", gradient_accumulation_steps=2)
"""


def test_the_stock_arguments_through_hfargumentparser_have_their_defaults(tmp_path):
    """transformers' own examples (run_clm.py...): the flags the job gives, else
    TrainingArguments' defaults (micro 8, accumulation 1)."""
    launch = "torchrun --nproc_per_node 2 train.py --model_name_or_path m --do_train"
    code, out = inspect(job(tmp_path, PARSER, launch), exits=(0,))
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (8, 1)
    code, out = inspect(job(tmp_path, PARSER, launch + " --per_device_train_batch_size 4"))
    assert out["global_batch_size"] == 4 * 2


def test_a_class_from_elsewhere_keeps_its_own_defaults_unknown(tmp_path):
    code, out = inspect(job(tmp_path, FOREIGN_CLASS, "torchrun --nproc_per_node 2 train.py"))
    assert out["gradient_accumulation_steps"] == 2
    assert out["micro_batch_size"] is None and out["global_batch_size"] is None
