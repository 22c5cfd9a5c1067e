"""Megatron-Bridge and NeMo 2 (and NeMo 1's YAML): ConfigContainer YAML override files, NeMo
recipe trees and ``key=value`` launch overrides, counted by megatron-core's micro-batch
calculator (:mod:`.rules`, :mod:`.program`); the model a job names (its recipe, its model
block: :mod:`.model`), which the smoke engine builds."""

from pathlib import Path

from translator.frameworks.megatron_bridge import models, program, rules, verdict
from translator.frameworks.megatron_bridge.codes import CODES
from translator.plugin.contract import Engine, Framework

FRAMEWORK = Framework(
    name=rules.NAME,
    claims=rules.claims,
    holds_batch=rules.holds_batch,
    context=rules.context,
    read=rules.read,
    interpret=rules.interpret,
    check=rules.check,
    loss_normalisation=rules.loss_normalisation,
    named_model=models.named_model,
    edits=rules.edits,
    insertion=rules.insertion,
    template=str(Path(__file__).with_name("megatron_bridge.yaml.j2")),
    filename="megatron_bridge.yaml",
    extensions=(".yaml", ".yml"),
    # Before Axolotl (20), which claims any YAML with a micro_batch_size.
    claim_order=15,
    codes=CODES,
    requires=("torch", "megatron.core"),
    extra="megatron-bridge",
    verdict=verdict.verdict,
    program=program.program,
    commands=program.TOOLS,
    engine=Engine(
        "translator.frameworks.megatron_bridge.engine",
        requires=("torch", "megatron.core"),
        extra="megatron-bridge",
        options=frozenset({"parity", "model_shape"}),
    ),
)
