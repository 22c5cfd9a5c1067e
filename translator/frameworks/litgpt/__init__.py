"""litgpt: ``litgpt pretrain`` / ``litgpt finetune`` YAMLs (``train.global_batch_size``,
``train.micro_batch_size``, ``devices``, ``num_nodes``), read as its ``TrainArgs`` floors them
(:mod:`.rules`), release by release (:mod:`.generation`); in a job, its command line with
jsonargparse's overrides (:mod:`.program`); its own parser and arithmetic as the verdict
(:mod:`.verdict`); its real ``litgpt pretrain`` on CPU as the smoke engine (:mod:`.engine`)."""

from pathlib import Path

from translator.frameworks.litgpt import models, program, rules, verdict
from translator.frameworks.litgpt.codes import CODES
from translator.plugin.contract import Engine, Framework

FRAMEWORK = Framework(
    name=rules.NAME,
    claims=rules.claims,
    holds_batch=rules.holds_batch,
    context=rules.context,
    model_context=models.model_context,
    read=rules.read,
    interpret=rules.interpret,
    check=rules.check,
    edits=rules.edits,
    node_lines=program.node_lines,
    insertion=rules.insertion,
    template=str(Path(__file__).with_name("litgpt.yaml.j2")),
    filename="litgpt.yaml",
    extensions=(".yaml", ".yml"),
    # Its nested micro_batch_size would pass for Axolotl's (claim order 20) by a plain search.
    claim_order=10,
    codes=CODES,
    inserted=rules.inserted,
    rewrites=frozenset({"litgpt-floor", "litgpt-world-mismatch"}),
    requires=("torch", "litgpt"),
    extra="native",
    verdict=verdict.verdict,
    named_model=models.named_model,
    engine=Engine(
        "translator.frameworks.litgpt.engine",
        requires=("torch", "litgpt"),
        extra="native",
        options=frozenset({"parity", "model_shape"}),
        environment=verdict.OFFLINE_ENV,
    ),
    program=program.program,
    job_config=program.job_config,
    commands=program.TOOLS,
)
