"""LLaMA-Factory: ``llamafactory-cli train config.yaml``, a YAML of the HF Trainer's keys beside
its own (``finetuning_type``, ``stage``, ``template``). In a job: the CLI with its overrides and
the variables that size its torchrun, or a program given its YAML (:mod:`.program`)."""

from pathlib import Path

from translator.frameworks.deepspeed import config_json as deepspeed_json
from translator.frameworks.llamafactory import program, rules
from translator.frameworks.llamafactory.codes import CODES
from translator.frameworks.shared import hf_deepspeed, hf_trainer, hf_verdict
from translator.plugin.contract import Framework

FRAMEWORK = Framework(
    name=rules.NAME,
    claims=rules.claims,
    read=rules.read,
    interpret=rules.interpret,
    check=rules.check,
    loss_normalisation=rules.loss_normalisation,
    memory_settings=rules.memory_settings,
    template=str(Path(__file__).with_name("llamafactory.yaml.j2")),
    filename="llamafactory.yaml",
    extensions=(".yaml", ".yml", ".json"),
    holds_batch=hf_trainer.holds_batch,
    context=hf_trainer.context,
    edits=hf_trainer.edits,
    claim_order=40,
    codes=CODES | hf_trainer.CODES | deepspeed_json.CODES,
    explains=deepspeed_json.EXPLAINS,
    insertion=hf_trainer.insertion,
    requires=("torch", "transformers"),
    extra="hf",
    verdict=hf_verdict.verdict,
    program=program.program,
    split_rules=hf_deepspeed.split_rules,
    commands=program.TOOLS,
)
