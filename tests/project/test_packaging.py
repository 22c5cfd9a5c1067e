"""A plain (non-editable) install ships the templates and renders."""

import subprocess
import sys
import zipfile

from paths import ROOT

from translator.frameworks import get


def test_wheel_ships_templates_and_renders_from_them(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path, ROOT],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("batchspec-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("deepspeed", "axolotl", "megatron", "hf", "llamafactory", "accelerate"):
        assert f"translator/frameworks/{name}/{get(name).filename}.j2" in names
    assert "translator/templates/sbatch.sh.j2" in names
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, wheel],
        check=True,
        capture_output=True,
    )
    probe = (
        "import translator.render as r; from translator.spec import BatchSpec; "
        "from translator.frameworks import FRAMEWORKS; "
        "s = BatchSpec(global_batch_size=32, micro_batch_size=2, world_size=8); "
        "print(r.template_dir()); [r.render(s, b) for b in FRAMEWORKS.values()]"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(site / "translator" / "templates")
