"""The pre-commit hook (.pre-commit-hooks.yaml), run by the real ``pre-commit try-repo`` on a
throwaway git repository: batch configs are checked, other JSON/YAML/shell files passed over."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

PRE_COMMIT = (
    str(Path(sys.executable).parent / "pre-commit")
    if (Path(sys.executable).parent / "pre-commit").exists()
    else (shutil.which("pre-commit") or "")
)

pytestmark = pytest.mark.skipif(
    not PRE_COMMIT or not (ROOT / ".git").exists(),
    reason="needs the pre-commit tool and a git checkout of batchspec",
)

GOOD_DS = '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}\n'
BAD_AXOLOTL = "base_model: x\nmicro_batch_size: 2\ngradient_acumulation_steps: 4\n"
#: Two more errors: another misspelt key, and a global batch that no world size splits.
BAD_AXOLOTL_TOO = "base_model: x\nmicro_batch_sise: 2\ngradient_accumulation_steps: 4\n"
BAD_DS = (
    '{"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8, '
    '"gradient_accumulation_steps": 4}\n'
)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def try_repo(repo: Path, home: Path) -> subprocess.CompletedProcess:
    env = os.environ | {
        "PRE_COMMIT_HOME": str(home),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        [PRE_COMMIT, "try-repo", str(ROOT), "batchspec-validate", "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_hook_stops_a_bad_config_and_passes_over_other_files(tmp_path):
    repo = tmp_path / "project"
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / "configs").mkdir()
    (repo / "configs" / "ds_zero2.json").write_text(GOOD_DS)
    (repo / "configs" / "sft.yml").write_text(BAD_AXOLOTL)
    (repo / "configs" / "dpo.yml").write_text(BAD_AXOLOTL_TOO)
    (repo / "configs" / "ds_bad.json").write_text(BAD_DS)
    (repo / "package.json").write_text('{"name": "web", "version": "1.0.0"}\n')
    (repo / ".github" / "workflows" / "ci.yml").write_text("on: push\njobs: {}\n")
    (repo / "build.sh").write_text("#!/bin/sh\nmake all\n")
    (repo / "scripts").mkdir()
    (repo / "scripts" / "zero3.json").write_text('{"train_micro_batch_size_per_gpu": "auto"}\n')
    (repo / "scripts" / "finetune.sh").write_text(  # a sound HF Trainer job: no false error
        "#!/bin/bash\ndeepspeed llava/train/train_mem.py --deepspeed ./scripts/zero3.json \\\n"
        "    --per_device_train_batch_size 16 --gradient_accumulation_steps 1 --output_dir o\n"
    )
    git(repo, "init", "-q")
    git(repo, "add", ".")
    home = tmp_path / "pre-commit-home"

    failed = try_repo(repo, home)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    # Errors only (--quiet): for each bad file its line, the error and its fix; nothing about
    # the sound files (their world-unknown warnings and infos), nor about the other files.
    ours = [
        line
        for line in failed.stdout.splitlines()
        if line.startswith(("configs/", "scripts/", "error: ", "  fix: "))
    ]
    assert len(ours) == 9, failed.stdout
    for bad in (
        "configs/sft.yml (axolotl)",
        "configs/dpo.yml (axolotl)",
        "configs/ds_bad.json (deepspeed)",
    ):
        assert f"{bad}: 1 error(s)" in ours
    assert "gradient_acumulation_steps" in failed.stdout
    for sound in ("ds_zero2.json", "finetune.sh", "zero3.json", "warning:", "info:"):
        assert sound not in failed.stdout
    for other in ("package.json", "ci.yml", "build.sh"):
        assert other not in failed.stdout

    (repo / "configs" / "sft.yml").write_text(BAD_AXOLOTL.replace("acumulation", "accumulation"))
    (repo / "configs" / "dpo.yml").unlink()
    (repo / "configs" / "ds_bad.json").unlink()
    git(repo, "add", "-A")
    passed = try_repo(repo, home)
    assert passed.returncode == 0, passed.stdout + passed.stderr
