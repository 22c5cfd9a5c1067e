"""torchtune: a recipe config with ``batch_size`` per data-parallel rank and
``gradient_accumulation_steps``, and no global batch key (:mod:`.rules`); which torchtune counts
it, 0.6.1 or main (:mod:`.generation`). In a job: ``tune run [torchrun options] RECIPE --config
X [key=value ...]`` (:mod:`.program`)."""

from pathlib import Path

from translator.frameworks.torchtune import models, program, rules, verdict
from translator.frameworks.torchtune.codes import CODES
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
    template=str(Path(__file__).with_name("torchtune.yaml.j2")),
    filename="torchtune.yaml",
    extensions=(".yaml", ".yml"),
    claim_order=45,
    codes=CODES,
    requires=("torch", "torchtune"),
    extra="native",
    verdict=verdict.verdict,
    named_model=models.named_model,
    engine=Engine(
        "translator.frameworks.torchtune.engine",
        requires=("torch", "torchtune", "torchao"),
        extra="native",
        options=frozenset({"parity", "model_shape"}),
        environment={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    ),
    program=program.program,
    job_config=program.job_config,
    commands=program.TOOLS,
)
