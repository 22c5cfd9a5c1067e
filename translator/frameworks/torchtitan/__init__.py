"""torchtitan: TOML job files (≤ 0.2.2) and launches of ``torchtitan.train`` with
``--section.key`` flags (0.3.0's ``--module``/``--config``, and the token-based generation
after it). Rendered as a launch script for torchtitan 0.3.0 (:mod:`.rules`, :mod:`.keys`)."""

from pathlib import Path

from translator.frameworks.torchtitan import edits, models, program, rules, template, verdict
from translator.frameworks.torchtitan.codes import CODES
from translator.plugin.contract import Engine, Framework

FRAMEWORK = Framework(
    name=rules.NAME,
    claims=rules.claims,
    holds_batch=rules.holds_batch,
    read=rules.read,
    interpret=rules.interpret,
    check=rules.check,
    template=str(Path(__file__).with_name("torchtitan.sh.j2")),
    filename="torchtitan.sh",
    extensions=(".toml",),
    claim_order=25,
    codes=CODES,
    context=template.context,
    model_context=template.model_context,
    edits=edits.edits,
    insertion=edits.insertion,
    inserted=edits.inserted,
    verdict=verdict.verdict,
    requires=("torch", "torchtitan"),
    extra="native",
    program=program.program,
    named_model=models.named_model,
    engine=Engine(
        "translator.frameworks.torchtitan.engine",
        requires=("torch", "torchtitan"),
        extra="native",
        options=frozenset({"parity", "model_shape"}),
        environment={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    ),
)
