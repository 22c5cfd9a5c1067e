"""Every ``--help`` shows how: one or two example lines (``$ batchspec ...``), and each runs as
written, in a folder holding the files the examples name, with exit 0 or the code its comment
documents (``# exit 1: ...``). smoke and tune run real (CPU) optimizer steps: the slowest."""

import re
import shlex

import pytest
from click.testing import CliRunner

from translator.cli import main

#: The files the examples name, as a user would have them.
FILES = {
    # global 4 on 2 ranks: tune has two micro-batches to probe (1 and 2), each a real run
    "spec.yaml": "global_batch_size: 4\nmicro_batch_size: 2\nworld_size: 2\n",
    "ds_config.json": (
        '{\n  "train_batch_size": 256,\n  "train_micro_batch_size_per_gpu": 2,\n'
        '  "gradient_accumulation_steps": 8,\n  "zero_optimization": {"stage": 2}\n}\n'
    ),
    # a checkpoint folder beside the config: the model the examples build and estimate
    "Llama-3.2-1B/config.json": (
        '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, '
        '"intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 8, '
        '"num_hidden_layers": 16, "vocab_size": 128256, "tie_word_embeddings": true}'
    ),
    "axolotl.yml": (
        "base_model: ./Llama-3.2-1B\nmicro_batch_size: 2\n"
        "gradient_accumulation_steps: 8\nsequence_len: 4096\n"
    ),
    "train.sh": (
        "#!/bin/bash\nNNODES=${NNODES:-2}\n"
        "torchrun --nnodes $NNODES --nproc_per_node 8 train.py --deepspeed ds_config.json \\\n"
        "    --per_device_train_batch_size 2 --gradient_accumulation_steps 8 --output_dir out\n"
    ),
}
EXAMPLE = re.compile(r"^\s*\$ (batchspec .*)$")
DOCUMENTED_EXIT = re.compile(r"#\s*exit (\d+)")


def help_text(*command: str) -> str:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output
    return result.stdout


def examples(*command: str) -> list[str]:
    return [m.group(1) for line in help_text(*command).splitlines() if (m := EXAMPLE.match(line))]


COMMANDS = [(), *((name,) for name in sorted(main.commands))]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "batchspec")
def test_every_help_shows_one_or_two_examples_of_itself(command):
    found = examples(*command)
    assert 1 <= len(found) <= 2, found
    for line in found:
        words = shlex.split(line, comments=True)
        assert words[0] == "batchspec" and (not command or words[1] == command[0]), line


@pytest.mark.parametrize(
    "line", [line for command in COMMANDS for line in examples(*command)], ids=lambda line: line
)
def test_each_example_runs_as_written(tmp_path, monkeypatch, line):
    monkeypatch.chdir(tmp_path)
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    documented = DOCUMENTED_EXIT.search(line)
    want = int(documented.group(1)) if documented else 0
    words = shlex.split(line, comments=True)
    result = CliRunner().invoke(main, words[1:])
    assert result.exit_code == want, result.output
    assert "Traceback" not in result.output
