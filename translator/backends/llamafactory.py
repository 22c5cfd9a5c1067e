"""LLaMA-Factory: ``llamafactory-cli train config.yaml``, a YAML of the HF Trainer's keys
(its TrainingArguments subclass Seq2SeqTrainingArguments), so the batch counts as the HF
Trainer's: ``per_device_train_batch_size × gradient_accumulation_steps × NNODES ×
NPROC_PER_NODE`` (the launcher's torchrun sizes; give them as ``--nnodes`` and
``--nproc-per-node``). Its ``deepspeed:`` path is relative to where ``llamafactory-cli`` runs
(the repository root in its examples), so it is looked for there, then beside the YAML and in
the folders above. LLaMA-Factory refuses to run undistributed, so plain ``python`` with
DataParallel cannot happen. Its Megatron-Bridge path (``USE_MEGATRON_BRIDGE=1``) divides the
global batch by the expert-parallel size, which a YAML alone does not show.
"""

from __future__ import annotations

from pathlib import Path

from translator.backends import hf
from translator.reading import Reading

NAME = "llamafactory"
TEMPLATE = "llamafactory.yaml.j2"
FILENAME = "llamafactory.yaml"
EXTENSIONS = (".yaml", ".yml", ".json")
PACKAGE = hf.PACKAGE
context, interpret, check, edits, insertion, holds_batch, verdict = (
    hf.context, hf.interpret, hf.check, hf.edits, hf.insertion, hf.holds_batch, hf.verdict)


def claims(text: str) -> bool:
    """LLaMA-Factory's own keys beside the HF ones."""
    return "finetuning_type:" in text or ("stage:" in text and "template:" in text)


def read(text: str, where: str) -> Reading:
    here = Path(where).resolve().parent if where != "-" else Path.cwd()
    return hf.read_as(NAME, text, where, [Path.cwd(), here, *here.parents])
