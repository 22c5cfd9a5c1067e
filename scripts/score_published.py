"""Score batchspec's reading of published jobs: fixtures/published/INDEX.yaml lists them (repository,
path, commit) with hand-derived readings; the files themselves are not committed. Fetch them into
a folder, each named as its entry's ``saved`` (and ``named_files[].saved``), then

    python scripts/score_published.py FOLDER [STYLE...] [--index INDEX.yaml]
    # BATCHSPEC="python -m translator" to run a checkout's own batchspec

lays each script out at its repository path with the files it names, runs ``batchspec inspect
--json`` from the repository root (as people run their scripts) and prints how many read right:
world, micro-batch, accumulation and global batch as expected, and an error exactly where the
framework would refuse the job."""

import collections
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "published"
args = sys.argv[1:]
index = HERE / "INDEX.yaml"
if "--index" in args:  # another list of published jobs in the same format
    at = args.index("--index")
    index = Path(args[at + 1])
    del args[at : at + 2]
FILES = Path(args[0])
KEYS = ("world_size", "micro_batch_size", "gradient_accumulation_steps", "global_batch_size")
entries = yaml.safe_load(index.read_text())
tree = Path(tempfile.mkdtemp(prefix="batchspec-published-"))
styles = set(args[1:]) or {"1", "2", "3", "4", "5", "6", "7"}
per = collections.defaultdict(lambda: [0, 0])
wrong_rows = []
false_errors = 0
for e in entries:
    style = str(e["style"]).split()[0]
    if style not in styles:
        continue
    root = tree / e["repo"].replace("/", "__")
    # A command block of a README or a docstring is run as a script of its own: saved as one.
    block = e["saved"].endswith(".sh") and not e["path"].endswith(".sh")
    target = root / (e["path"] + ".sh" if block else e["path"])
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FILES / e["saved"], target)
    for named in e.get("named_files") or []:
        if named.get("saved") and (FILES / named["saved"]).exists():
            p = root / named["path"]
            p.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(FILES / named["saved"], p)
    import os

    cmd = os.environ.get("BATCHSPEC", "batchspec").split()
    out = subprocess.run(
        [*cmd, "inspect", "--json", str(target.relative_to(root))],
        cwd=root,
        capture_output=True,
        text=True,
    )
    try:
        got = json.loads(out.stdout)
        if "files" in got:
            got = got["files"][0]
    except json.JSONDecodeError:
        got = {}
    exp = e["expected"]
    ok_values = all(got.get(k) == exp.get(k) for k in KEYS)
    errors = [f for f in got.get("findings", []) if f.get("severity") == "error"]
    expects_error = e.get("outcome") in ("error", "runs_then_error")
    ok = ok_values and (bool(errors) == expects_error) and out.returncode in (0, 1)
    if errors and not expects_error and e.get("outcome") == "runs":
        false_errors += 1
    per[style][0] += ok
    per[style][1] += 1
    if not ok:
        wrong_rows.append(
            (
                style,
                e["repo"],
                e["path"],
                out.returncode,
                {k: (got.get(k), exp.get(k)) for k in KEYS if got.get(k) != exp.get(k)},
                [f["code"] for f in errors][:3],
                (out.stderr.strip().splitlines() or [""])[-1][:120],
            )
        )
total = sum(v[0] for v in per.values()), sum(v[1] for v in per.values())
print(f"read right: {total[0]} of {total[1]}; false errors on sound jobs: {false_errors}")
for s in sorted(per):
    print(f"  style {s}: {per[s][0]} of {per[s][1]}")
for row in wrong_rows:
    print("  wrong:", row)
