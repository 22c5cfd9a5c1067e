"""``smoke --launcher k8s --dry-run`` prints one YAML stream, as ``| kubectl apply -f -`` reads
it: its header lines stay comments whatever ``--workdir`` holds (issue 37: a newline there
made the stream parse as extra documents)."""

import pytest
import yaml
from run_batchspec import run

K8S = ["--launcher", "k8s", "--k8s-image", "ghcr.io/acme/train:1", "--k8s-volume", "work"]


@pytest.mark.parametrize("breaks", ["\n", "\r", "\x85", "\u2028"])
def test_a_line_break_in_the_workdir_stays_in_the_comment(tmp_path, breaks):
    spec = tmp_path / "spec.yaml"
    spec.write_text("global_batch_size: 8\nmicro_batch_size: 2\nsequence_length: 32\n")
    workdir = f"/data/w{breaks}---{breaks}kind: Secret{breaks}metadata: {{name: x}}"
    result = run("smoke", spec, *K8S, "--model", "tiny", "--workdir", workdir, "--dry-run")
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in documents] == ["Service", "Job"]
    escaped = workdir.encode("unicode_escape").decode()
    assert result.stdout.splitlines()[:3] == [
        "# engine: torch",
        f"# would write {escaped}/spec.json",
        f"# and {escaped}/smoke.k8s.yaml, submitted as: kubectl apply -f '{escaped}/smoke.k8s.yaml'",
    ]
    mounts = documents[1]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert mounts[0]["mountPath"] == workdir
