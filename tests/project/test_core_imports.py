"""The core imports no command-line, template or framework library, so ``plan`` starts fast."""

import json
import subprocess
import sys

CORE = [
    "translator.spec",
    "translator.batch.solve",
    "translator.words.findings",
    "translator.words.errors",
    "translator.checks.advice",
    "translator.frameworks",
    "translator.checks.verdict",
    "translator.render",
    "translator.inspection",
    "translator.edit.update",
    "translator.guard",
]
HEAVY = ["click", "jinja2", "torch", "deepspeed", "megatron", "axolotl", "transformers"]


def loaded_after(code: str) -> set[str]:
    probe = f"import sys; {code}; import json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in json.loads(out.stdout)}


def test_core_modules_import_nothing_heavy():
    loaded = loaded_after("; ".join(f"import {m}" for m in CORE))
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_plan_loads_no_framework_and_no_jinja():
    code = (
        "from click.testing import CliRunner; from translator.cli import main; "
        "CliRunner().invoke(main, ['plan', '--global-batch', '64', '--world-size', '8'])"
    )
    loaded = loaded_after(code)
    assert not loaded & {"jinja2", "torch", "deepspeed", "megatron", "axolotl"}
