"""DeepSpeed: a JSON with ``train_batch_size``, ``train_micro_batch_size_per_gpu`` and
``gradient_accumulation_steps``, which DeepSpeed checks as ``TBS == micro × gas × world``."""

from pathlib import Path

from translator.frameworks.deepspeed import config_json, launcher, rules, verdict
from translator.frameworks.deepspeed.codes import CODES
from translator.plugin.contract import Engine, Framework

FRAMEWORK = Framework(
    claims=rules.claims,
    holds_batch=rules.holds_batch,
    context=rules.context,
    interpret=rules.interpret,
    check=rules.check,
    edits=rules.edits,
    node_lines=rules.node_lines,
    name="deepspeed",
    template=str(Path(__file__).with_name("deepspeed.json.j2")),
    filename=config_json.FILENAME,
    extensions=(".json",),
    read=config_json.read,
    memory_settings=config_json.memory_settings,
    claim_order=10,
    codes=CODES | config_json.CODES,
    rewrites=frozenset({"deepspeed-batch-mismatch", "deepspeed-floor"}),
    explains=config_json.EXPLAINS,
    requires=("torch", "deepspeed"),
    extra="deepspeed",
    verdict=verdict.verdict,
    launchers=(launcher.LAUNCHER,),
    engine=Engine(
        "translator.frameworks.deepspeed.engine",
        requires=("torch", "deepspeed"),
        extra="deepspeed",
        options=frozenset({"zero_stages", "parity", "model_config"}),
    ),
)
