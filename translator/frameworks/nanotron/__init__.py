"""nanotron: a YAML of ``Config`` sections; the batch is in ``tokens`` and ``parallelism``, the
world must be the product of the parallel sizes. In a job: any program given such a YAML with
``--config-file`` (``run_train.py``) (:mod:`.program`). Two generations of keys
(:mod:`.generation`); training needs CUDA, so its smoke engine is GPU-only."""

from pathlib import Path

from translator.frameworks.nanotron import engine, models, program, rules, verdict
from translator.frameworks.nanotron.codes import CODES
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
    split_rules=rules.split_rules,
    template=str(Path(__file__).with_name("nanotron.yaml.j2")),
    filename="nanotron.yaml",
    extensions=(".yaml", ".yml"),
    # Before Axolotl, which claims any YAML with a micro_batch_size key.
    claim_order=15,
    codes=CODES,
    requires=("torch", "nanotron", "dacite"),
    extra="nanotron",
    verdict=verdict.verdict,
    engine=Engine(
        "translator.frameworks.nanotron.engine",
        requires=engine.REQUIRES,
        extra="nanotron",
        options=frozenset({"model_shape"}),
        environment=engine.ENVIRONMENT,
    ),
    program=program.program,
    named_model=models.named_model,
)
