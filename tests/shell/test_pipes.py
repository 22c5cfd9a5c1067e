"""A command substitution of text tools on text the script knows is what they print
(``$(echo "$IPS" | wc -l)``); any other command, or an unknown word, leaves it unknown."""

import pytest

from translator import shell


def value(script: str, name: str = "V") -> str | None:
    return shell.parse(script, "t.sh").variables[name][-1].text


HOSTS = 'IPS="10.0.0.1\n10.0.0.2\n10.0.0.3"\n'


@pytest.mark.parametrize(
    "substitution, printed",
    [
        ('$(echo "$IPS" | wc -l)', "3"),
        ('`echo "$IPS" | head -n1`', "10.0.0.1"),
        ('$(echo "$IPS" | head -2 | tail -n 1)', "10.0.0.2"),
        ('$(echo "$IPS" | tail -1 | cut -d. -f4)', "3"),
        ("$(echo a b c | awk '{print $2}')", "b"),
        ("$(echo -n 8)", "8"),
        ("$(echo $IPS | wc -l)", "1"),  # unquoted: one line of three words
    ],
)
def test_text_tools_on_known_text_print_what_they_print(substitution, printed):
    assert value(f"{HOSTS}V={substitution}\n") == printed


@pytest.mark.parametrize(
    "substitution",
    [
        "$(nvidia-smi -L | wc -l)",  # a command that asks the machine
        '$(echo "$UNSET_ELSEWHERE" | wc -l)',  # text the script does not know
        '$(echo "$IPS" | sort | head -1)',  # a filter not read
        '$(echo "$IPS" | head -c 4)',
        '$(echo "$IPS" | wc -c)',
    ],
)
def test_anything_else_stays_unknown(substitution):
    assert value(f"{HOSTS}V={substitution}\n") is None


@pytest.mark.parametrize(
    "substitution, printed",
    [
        ("$(nvidia-smi -L | wc -l)", "4"),
        ("$(nvidia-smi --list-gpus | wc -l)", "4"),
        ("$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)", "4"),
        ('$(python -c "import torch; print(torch.cuda.device_count())")', "4"),
        # torch sees what CUDA_VISIBLE_DEVICES leaves it; nvidia-smi lists the node's all
        (
            '$(CUDA_VISIBLE_DEVICES=0,1 python3 -c "import torch; print(torch.cuda.device_count())")',
            None,
        ),
    ],
)
def test_a_gpu_query_answers_the_gpus_of_the_node(substitution, printed):
    assert shell.parse(f"V={substitution}\n", "t.sh", gpus="4").variables["V"][-1].text == printed
    assert value(f"V={substitution}\n") is None  # the node's GPUs not known


def test_torch_counts_the_gpus_cuda_visible_devices_lists():
    script = 'export CUDA_VISIBLE_DEVICES=0,1\nV=$(python -c "import torch; print(torch.cuda.device_count())")\n'
    assert shell.parse(script, "t.sh", gpus="8").variables["V"][-1].text == "2"
    script = "export CUDA_VISIBLE_DEVICES=0,1\nV=$(nvidia-smi -L | wc -l)\n"
    assert shell.parse(script, "t.sh", gpus="8").variables["V"][-1].text == "8"


def test_slurm_gives_the_node_its_gpus():
    script = "#!/bin/bash\n#SBATCH --gres=gpu:4\nV=$(nvidia-smi -L | wc -l)\n"
    assert value(script) == "4"


@pytest.mark.parametrize(
    "gres, gpus",
    [("gpu:a100:8", "8"), ("gpu:8", "8"), ("gpu:a100", "1"), ("gpu", "1"), ("gpu:4,nvme:1", "4")],
)
def test_gres_gives_the_node_its_count_of_gpus(gres, gpus):
    """``--gres=gpu[:type][:count]``: the count, one when not written (``gpu:a100`` is one
    A100, not 100 GPUs)."""
    assert value(f"#!/bin/bash\n#SBATCH --gres={gres}\nV=$(nvidia-smi -L | wc -l)\n") == gpus
