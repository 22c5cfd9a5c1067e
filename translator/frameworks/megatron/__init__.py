"""Megatron-LM: launch scripts (or argument files) with ``--micro-batch-size`` and
``--global-batch-size``; accumulation is implied as ``global / (micro × DP)``."""

from pathlib import Path

from translator.frameworks.deepspeed import config_json as deepspeed_json
from translator.frameworks.megatron import model, program, rules, shape, verdict
from translator.frameworks.megatron.codes import CODES
from translator.plugin.contract import Engine, Framework

FRAMEWORK = Framework(
    name=rules.NAME,
    claims=rules.claims,
    holds_batch=rules.holds_batch,
    context=rules.context,
    read=program.read,
    interpret=rules.interpret,
    check=rules.check,
    loss_normalisation=rules.loss_normalisation,
    edits=rules.edits,
    program=program.program,
    memory_settings=model.memory_settings,
    split_rules=model.split_rules,
    named_model=shape.named_model,
    template=str(Path(__file__).with_name("megatron.sh.j2")),
    filename="megatron.sh",
    extensions=(".sh", ".bash", ".slurm", ".sbatch", ".args", ".txt"),
    claim_order=30,
    codes=CODES | deepspeed_json.CODES,
    explains=deepspeed_json.EXPLAINS,
    rewrites=frozenset({"deepspeed-batch-mismatch", "deepspeed-floor"}),
    requires=("torch", "megatron.core"),
    extra="megatron",
    verdict=verdict.verdict,
    engine=Engine(
        "translator.frameworks.megatron.engine",
        requires=("torch", "megatron.core"),
        extra="megatron",
        options=frozenset({"parity", "model_shape"}),
    ),
)
