"""Accelerate's config YAML (``accelerate launch --config_file``): the launch, not the batch; it
gives the other files of a job their world, parallel sizes and accumulation override."""

from pathlib import Path

from translator.frameworks.accelerate import launcher, memory, rules, verdict
from translator.frameworks.accelerate.codes import CODES
from translator.frameworks.shared import hf_trainer
from translator.plugin.contract import Framework

FRAMEWORK = Framework(
    name=rules.NAME,
    claims=rules.claims,
    holds_batch=rules.holds_batch,
    context=rules.context,
    read=rules.read,
    interpret=rules.interpret,
    check=rules.check,
    edits=rules.edits,
    node_lines=rules.node_lines,
    insertion=rules.insertion,
    launch_of=rules.launch_of,
    launch_edits=rules.launch_edits,
    memory_settings=memory.memory_settings,
    template=str(Path(__file__).with_name("accelerate.yaml.j2")),
    filename="accelerate.yaml",
    extensions=(".yaml", ".yml", ".json"),
    claim_order=60,
    codes=CODES | hf_trainer.CODES,
    explains=frozenset({"accelerate-batch-elsewhere"}),
    requires=("torch", "accelerate"),
    extra="hf",
    verdict=verdict.verdict,
    launchers=(launcher.LAUNCHER,),
)
