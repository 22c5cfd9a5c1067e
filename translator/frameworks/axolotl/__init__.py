"""Axolotl: a YAML with ``micro_batch_size`` and ``gradient_accumulation_steps`` per rank; the
world comes from the launcher's ``WORLD_SIZE``. In a job: ``axolotl train`` and the
``axolotl.cli.train`` module, with their overrides (:mod:`.program`)."""

from pathlib import Path

from translator.frameworks.axolotl import program, rules, verdict
from translator.frameworks.axolotl.codes import CODES
from translator.frameworks.deepspeed import config_json as deepspeed_json
from translator.frameworks.shared import hf_deepspeed
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
    edits=rules.edits,
    insertion=rules.insertion,
    memory_settings=rules.memory_settings,
    template=str(Path(__file__).with_name("axolotl.yaml.j2")),
    filename="axolotl.yaml",
    extensions=(".yaml", ".yml"),
    claim_order=20,
    codes=CODES | deepspeed_json.CODES,
    rewrites=frozenset({"axolotl-batch-size-ignored", "axolotl-world-rounding"}),
    explains=deepspeed_json.EXPLAINS,
    requires=("torch", "axolotl"),
    extra="axolotl",
    verdict=verdict.verdict,
    engine=Engine(
        "translator.frameworks.axolotl.engine",
        requires=("torch", "axolotl"),
        extra="axolotl",
        options=frozenset({"parity", "model_config"}),
        environment=verdict.OFFLINE_ENV,
    ),
    partner_files=hf_deepspeed.partner_files,
    program=program.program,
    split_rules=hf_deepspeed.split_rules,
    commands=program.TOOLS,
)
