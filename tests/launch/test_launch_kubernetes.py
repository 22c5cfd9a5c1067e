"""``smoke --launcher k8s``: the manifest it prints is valid for Kubernetes' own schema, the
flags it needs are asked for, and, through a ``kubectl`` that runs the Job's pod on this
machine, the run counts its samples like any other (and a timeout deletes the Job)."""

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S = ["--launcher", "k8s", "--k8s-image", "ghcr.io/acme/train:1", "--k8s-volume", "work"]
#: The oldest Kubernetes the schema package holds (Indexed Jobs give pods host names since 1.24).
KUBERNETES = "1.25.0"


def smoke(*args, env=None, cwd=None):
    done = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=cwd,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("global_batch_size: 8\nmicro_batch_size: 2\nsequence_length: 32\n")
    return path


def manifest_of(spec, tmp_path, *extra):
    code, out, err = smoke(spec, *K8S, "--workdir", tmp_path / "w", "--dry-run", "--json", *extra)
    assert code == 0, err
    return list(yaml.safe_load_all(json.loads(out)["files"]["smoke.k8s.yaml"]))


@pytest.mark.parametrize("nodes, device", [(1, "cpu"), (2, "gpu")])
def test_the_manifest_is_valid_for_kubernetes(spec, tmp_path, nodes, device):
    service, job = manifest_of(
        spec, tmp_path, "--nnodes", nodes, "--nproc-per-node", 2, "--device", device
    )
    for document in (service, job):
        kubernetes_validate.validate(document, KUBERNETES, strict=True)
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == nodes
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == job["metadata"]["name"]
    (container,) = pod["containers"]
    limits = container.get("resources", {}).get("limits", {})
    assert limits.get("nvidia.com/gpu") == (2 if device == "gpu" else None)
    command = container["command"]
    assert command[command.index("--nproc_per_node") + 1] == "2"
    if nodes > 1:  # every node meets at pod 0, by its stable host name under the Service
        endpoint = command[command.index("--rdzv-endpoint") + 1]
        assert endpoint == f"{job['metadata']['name']}-0.{service['metadata']['name']}:29500"
    assert container["volumeMounts"][0]["mountPath"] == str(tmp_path / "w")


def test_the_schema_check_fails_a_wrong_manifest(spec, tmp_path):
    """The check is no formality: a Job that asks for "two" completions is refused."""
    _, job = manifest_of(spec, tmp_path)
    job["spec"]["completions"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES, strict=True)


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--launcher", "k8s"], "--launcher k8s needs --k8s-image and --k8s-volume"),
        ([*K8S[:4], "--k8s-volume", "Work_Dir"], "--k8s-volume 'Work_Dir' is not a Kubernetes"),
        (["--k8s-image", "x"], "--k8s-image, --k8s-volume and --k8s-namespace are for"),
        (["--slurm", *K8S], "--slurm is --launcher slurm: give one launcher, not also k8s"),
    ],
)
def test_a_launcher_asked_for_wrongly_is_one_line_exit_2(spec, tmp_path, flags, says):
    code, out, err = smoke(spec, *flags, "--workdir", tmp_path / "w", "--dry-run")
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "w").exists()


FAKE_KUBECTL = """\
#!{python}
# A kubectl whose cluster is this machine: `apply` starts the Job's one pod (its container's
# command, with this Python) in the background; `get` reports its end as Kubernetes does.
import json, os, signal, subprocess, sys, time
import yaml
state = {state!r}
args = sys.argv[1:]
with open(os.path.join(state, "calls"), "a") as calls:
    calls.write(" ".join(args) + "\\n")
if args[0] == "apply":
    documents = list(yaml.safe_load_all(open(args[args.index("-f") + 1])))
    job = next(d for d in documents if d["kind"] == "Job")
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    command[0] = {python!r}
    log = open(os.path.join(state, "log"), "w")
    pod = subprocess.Popen(
        ["sh", "-c", '"$@"; echo $? > ' + os.path.join(state, "rc"), "pod", *command],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    open(os.path.join(state, "pid"), "w").write(str(pod.pid))
elif args[0] == "get":
    rc = os.path.join(state, "rc")
    if not os.path.exists(rc):
        print(" ")
    else:
        print("1 " if open(rc).read().strip() == "0" else " 1")
elif args[0] == "logs":
    print(open(os.path.join(state, "log")).read()[-4000:])
elif args[0] == "delete":
    # A pod's processes all end with it: torchrun's workers have sessions of their own, so
    # the whole tree is killed, not only the shell's group.
    def tree(pid):
        found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        return [pid] + [p for child in found.stdout.split() for p in tree(int(child))]
    for pid in tree(int(open(os.path.join(state, "pid")).read())):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
"""


@pytest.fixture
def kubectl(tmp_path, monkeypatch):
    """A fake ``kubectl`` on PATH; returns its folder (``calls`` lists what it was asked)."""
    state = tmp_path / "cluster"
    state.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "kubectl"
    fake.write_text(FAKE_KUBECTL.format(python=sys.executable, state=str(state)))
    fake.chmod(0o755)
    return state, dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.framework
def test_a_run_through_kubernetes_counts_the_global_batch(spec, tmp_path, kubectl):
    state, env = kubectl
    code, out, err = smoke(
        spec, *K8S, "--nproc-per-node", 2, "--steps", 2, "--device", "cpu",
        "--workdir", tmp_path / "w", "--json", env=env,
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["launcher"] == "k8s" and result["job"].startswith("batchspec-smoke-torch-")
    assert result["samples_per_optimizer_step"] == [8, 8]
    calls = (state / "calls").read_text().splitlines()
    assert calls[0] == f"apply -f {tmp_path / 'w' / 'smoke.k8s.yaml'}"
    assert any(c.startswith(f"get job {result['job']}") for c in calls)
    assert not any(c.startswith("delete") for c in calls)


def test_a_timeout_deletes_the_job(spec, tmp_path, kubectl):
    state, env = kubectl
    code, out, err = smoke(
        spec, *K8S, "--nproc-per-node", 1, "--steps", 50, "--device", "cpu", "--timeout", 1,
        "--workdir", tmp_path / "w", env=env,
    )  # fmt: skip
    assert code == 1, err
    assert "delete -f" in (state / "calls").read_text()
    assert "timeout" in err and "Traceback" not in err
    time.sleep(1)  # a killed process is gone from the table once reaped
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "w")], capture_output=True, text=True)
    assert left.stdout.split() == [], "the pod's processes outlived its deletion"
