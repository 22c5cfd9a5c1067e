"""scripts/megatron_bridge_recipes.py on a recipes tree of its own, in a git repository made
here: which of a recipe function's assignments reach the table (top-level literals, in order,
the last winning; a helper's; an alias's name) and which leave a key out."""

import ast
import runpy
import subprocess
import sys

import pytest
from paths import ROOT

generator = runpy.run_path(str(ROOT / "scripts" / "megatron_bridge_recipes.py"))

RECIPES = "src/megatron/bridge/recipes"
TREE = {
    f"{RECIPES}/__init__.py": "from megatron.bridge.recipes.toy import *\n",
    f"{RECIPES}/common.py": """\
from megatron.bridge.training.config import ConfigContainer, TrainingConfig


def _pretrain_common() -> ConfigContainer:
    cfg = ConfigContainer(train=TrainingConfig(global_batch_size=999))
    cfg.train.global_batch_size = 32
    cfg.train.micro_batch_size = 2
    cfg.model.context_parallel_size = 1
    return cfg
""",
    f"{RECIPES}/toy/__init__.py": "from megatron.bridge.recipes.toy.toy import *\n",
    f"{RECIPES}/toy/toy.py": """\
from megatron.bridge.recipes.toy.h100.toy import (
    toy_1b_pretrain_1gpu_h100_bf16_config as toy_1b_pretrain_config,
)
""",
    f"{RECIPES}/toy/h100/__init__.py": "from megatron.bridge.recipes.toy.h100.toy import *\n",
    f"{RECIPES}/toy/h100/toy.py": '''\
import os

from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.config import ConfigContainer
from elsewhere import build, provider

SEQUENCE: int = 8192


def _topology(cfg: ConfigContainer, pipeline: int) -> None:
    cfg.model.tensor_model_parallel_size = 4
    cfg.model.pipeline_model_parallel_size = pipeline


def toy_1b_pretrain_1gpu_h100_bf16_config() -> ConfigContainer:
    """The helper's batch, its micro-batch under an if, its CP lost with the model block."""
    cfg = _pretrain_common()
    cfg.model = provider()
    cfg.model.tensor_model_parallel_size = 2
    cfg.model.tensor_model_parallel_size = 1
    cfg.model.pipeline_model_parallel_size = 1
    cfg.train.global_batch_size = 64
    seq_length = 4096
    cfg.dataset.seq_length = seq_length
    if os.environ.get("BIG"):
        cfg.train.micro_batch_size = 4
    return cfg


def toy_8b_pretrain_8gpu_h100_bf16_config() -> ConfigContainer:
    """Another recipe's values, a helper given the config, a constant, an expression."""
    cfg = toy_1b_pretrain_1gpu_h100_bf16_config()
    _topology(cfg, pipeline=2)
    cfg.dataset.seq_length = SEQUENCE
    cfg.model.context_parallel_size = 2
    cfg.train.global_batch_size = 8 * 64
    return cfg


def toy_elsewhere_pretrain_config() -> ConfigContainer:
    cfg = build()
    cfg.model.context_parallel_size = 1
    return cfg


def toy_benchmark_pretrain_8gpu_h100_bf16_config() -> ConfigContainer:
    cfg = _pretrain_common()
    return cfg
''',
    "src/megatron/bridge/perf_recipes/toy/__init__.py": (
        "from .h100 import toy_benchmark_pretrain_8gpu_h100_bf16_config\n"
    ),
}


def git(repo, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The module the generator writes from the toy tree, run as Python, and its text."""
    repo = tmp_path_factory.mktemp("bridge")
    git(repo, "init", "-q")
    for path, text in TREE.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "toy recipes")
    out = repo / "recipe_values.py"
    assert generator["main"]([str(repo), "--out", str(out)]) == 0
    text = out.read_text()
    module: dict = {}
    exec(compile(text, str(out), "exec"), module)
    return module, text, git(repo, "rev-parse", "HEAD").strip()


def test_top_level_literals_in_order_over_the_helpers(written):
    recipes = written[0]["RECIPES"]
    assert recipes["toy_1b_pretrain_1gpu_h100_bf16_config"] == {
        "dataset.seq_length": 4096,
        "model.pipeline_model_parallel_size": 1,
        "model.tensor_model_parallel_size": 1,
        "train.global_batch_size": 64,
    }


def test_helpers_given_the_config_constants_and_what_leaves_a_key_out(written):
    recipes = written[0]["RECIPES"]
    # TP 4 from _topology's literal; PP its parameter; GBS an expression
    assert recipes["toy_8b_pretrain_8gpu_h100_bf16_config"] == {
        "dataset.seq_length": 8192,
        "model.context_parallel_size": 2,
        "model.tensor_model_parallel_size": 4,
    }
    assert recipes["toy_elsewhere_pretrain_config"] == {"model.context_parallel_size": 1}


def test_a_legacy_name_is_its_recipe_and_a_benchmarks_name_is_left_out(written):
    recipes = written[0]["RECIPES"]
    assert recipes["toy_1b_pretrain_config"] == recipes["toy_1b_pretrain_1gpu_h100_bf16_config"]
    assert "toy_benchmark_pretrain_8gpu_h100_bf16_config" not in recipes
    assert list(recipes) == sorted(recipes)


def test_the_module_names_its_source_and_is_formatted(written):
    module, text, commit = written
    assert module["SOURCE"] == f"NVIDIA-NeMo/Megatron-Bridge@{commit}"
    assert f"--rev {commit}" in text and "Do not edit" in text
    ast.parse(text)
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert formatted.returncode == 0, formatted.stderr
