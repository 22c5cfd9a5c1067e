"""The Hugging Face Trainer and TRL: TrainingArguments as a YAML or JSON file
(``HfArgumentParser``, ``trl ... --config``)."""

from pathlib import Path

from translator.frameworks.deepspeed import config_json as deepspeed_json
from translator.frameworks.hf import program
from translator.frameworks.shared import hf_deepspeed, hf_trainer, hf_verdict
from translator.plugin.contract import Engine, Framework

FRAMEWORK = Framework(
    name=hf_trainer.NAME,
    claims=hf_trainer.claims,
    holds_batch=hf_trainer.holds_batch,
    context=hf_trainer.context,
    read=hf_trainer.read,
    interpret=hf_trainer.interpret,
    check=hf_trainer.check,
    loss_normalisation=hf_trainer.loss_normalisation,
    edits=hf_trainer.edits,
    insertion=hf_trainer.insertion,
    memory_settings=hf_trainer.memory_settings,
    template=str(Path(__file__).with_name("hf.yaml.j2")),
    filename="hf.yaml",
    extensions=(".yaml", ".yml", ".json"),
    claim_order=50,
    codes=hf_trainer.CODES | deepspeed_json.CODES,
    explains=deepspeed_json.EXPLAINS,
    requires=("torch", "transformers"),
    extra="hf",
    verdict=hf_verdict.verdict,
    engine=Engine(
        "translator.frameworks.hf.engine",
        requires=("torch", "transformers"),
        extra="hf",
        zero_requires=("deepspeed",),
        zero_extra="deepspeed",
        options=frozenset({"parity", "model_config"}),
        environment={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    ),
    partner_files=hf_deepspeed.partner_files,
    program=program.program,
    split_rules=hf_deepspeed.split_rules,
    job_config=program.job_config,
    commands=program.TOOLS,
)
