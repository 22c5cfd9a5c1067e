"""The Kubernetes launcher: an Indexed ``batch/v1`` Job of one pod per node, and a headless
Service that gives pod 0 a stable name for torchrun's rendezvous.

Why an Indexed Job and not Kubeflow's ``PyTorchJob``: it needs nothing but Kubernetes itself
(1.25+), where a ``PyTorchJob`` needs the training operator installed in the cluster; each pod
gets a stable host name (``JOB-INDEX.SERVICE``), so pod 0 is the c10d rendezvous of every node,
and ``backoffLimit: 0`` makes a failed rank end the run instead of restarting it.

Like Slurm's, the ranks read the spec and config from the work folder and write their results
there, so the work folder is a volume (``--k8s-volume``, a ReadWriteMany claim) that the pods
mount at the work folder's path and that this machine sees at the same path. ``kubectl``
applies the manifest, is asked for the Job's state, and deletes both objects on ``--timeout``,
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import time
from dataclasses import dataclass

import yaml

from translator.launch import workdir as workdirs
from translator.launch.command import SmokePlan, torchrun_args, worker_args
from translator.launch.launcher import Built, Ran
from translator.launch.progress import Progress
from translator.words.errors import InputError

#: The manifest's name in the work folder.
MANIFEST = "smoke.k8s.yaml"
#: torchrun's rendezvous port on pod 0.
RDZV_PORT = 29500
#: Seconds between two questions to the API server.
POLL_SECONDS = 2.0
#: A DNS-1123 label: what Kubernetes accepts as a Job or Service name.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class KubernetesOptions:
    """What the Job asks of the cluster."""

    image: str
    """The container image the ranks run in: batchspec and the framework installed."""
    volume: str
    """The PersistentVolumeClaim mounted at the work folder (ReadWriteMany when several nodes)."""
    namespace: str | None = None
    """The namespace of the Job and Service (kubectl's current one when not given)."""

    def validate(self) -> None:
        if not self.image.strip() or any(c.isspace() for c in self.image):
            raise InputError(f"--k8s-image {self.image!r} is not an image reference")
        for flag, value in (("--k8s-volume", self.volume), ("--k8s-namespace", self.namespace)):
            if value is not None and not _LABEL.fullmatch(value):
                raise InputError(
                    f"{flag} {value!r} is not a Kubernetes name (lower-case letters, digits "
                    "and '-', starting and ending with a letter or digit)"
                )


def job_name(plan: SmokePlan) -> str:
    """``batchspec-smoke-FRAMEWORK-HASH``: the hash of the work folder keeps two runs apart."""
    digest = hashlib.sha256(str(plan.workdir).encode()).hexdigest()[:6]
    framework = re.sub(r"[^a-z0-9]+", "-", plan.framework.lower()).strip("-")
    return f"batchspec-smoke-{framework}-{digest}"[:63].rstrip("-")


def rank_command(plan: SmokePlan) -> list[str]:
    """What each pod runs: torchrun with the rendezvous on pod 0, then the rank's worker. The
    image's own ``python`` runs it (this machine's interpreter path means nothing there)."""
    name = job_name(plan)
    endpoint = f"{name}-0.{name}:{RDZV_PORT}"
    return ["python", "-m", "torch.distributed.run", *torchrun_args(plan, endpoint)] + [
        *worker_args(plan)
    ]


def manifest(plan: SmokePlan, options: KubernetesOptions, variables: dict[str, str]) -> str:
    """The Service and the Job, as one multi-document YAML file."""
    options.validate()
    name = job_name(plan)

    def meta() -> dict:  # one dict per use: a shared one would be written as a YAML alias
        labels = {"app.kubernetes.io/name": "batchspec-smoke"}
        return {"name": name, "labels": labels} | (
            {"namespace": options.namespace} if options.namespace else {}
        )

    container: dict = {
        "name": "ranks",
        "image": options.image,
        "command": rank_command(plan),
        "env": [{"name": k, "value": v} for k, v in sorted(variables.items())],
        "ports": [{"name": "rendezvous", "containerPort": RDZV_PORT}],
        "volumeMounts": [{"name": "workdir", "mountPath": str(plan.workdir)}],
    }
    if plan.device == "gpu":
        container["resources"] = {"limits": {"nvidia.com/gpu": plan.nproc}}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(),
        "spec": {
            "clusterIP": "None",
            "selector": {"batch.kubernetes.io/job-name": name},
            "ports": [{"name": "rendezvous", "port": RDZV_PORT}],
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(),
        "spec": {
            "completionMode": "Indexed",
            "completions": plan.nnodes,
            "parallelism": plan.nnodes,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": meta()["labels"]},
                "spec": {
                    "subdomain": name,
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [
                        {"name": "workdir", "persistentVolumeClaim": {"claimName": options.volume}}
                    ],
                },
            },
        },
    }
    return yaml.safe_dump_all([service, job], sort_keys=False)


@dataclass(frozen=True)
class Kubernetes:
    """The Kubernetes launcher (``--launcher k8s``)."""

    options: KubernetesOptions
    """The image, the work folder's volume, the namespace."""
    name: str = "k8s"
    remote: bool = True

    def check(self) -> None:
        self.options.validate()
        if shutil.which("kubectl") is None:
            raise InputError(
                "kubectl not found: --launcher k8s applies the Job with kubectl "
                "(--dry-run prints it without one)"
            )

    def build(self, plan: SmokePlan, variables: dict[str, str]) -> Built:
        path = str(plan.workdir / MANIFEST)
        return Built(
            {MANIFEST: manifest(plan, self.options, variables)},
            ["kubectl", "apply", "-f", path],
            rank_command(plan),
            variables,
        )

    def launch(self, plan: SmokePlan, built: Built, timeout: float | None, say: Progress) -> Ran:
        path = plan.workdir / MANIFEST
        workdirs.write(plan.workdir, {path: built.files[MANIFEST]})
        name = job_name(plan)
        scope = ["--namespace", self.options.namespace] if self.options.namespace else []
        _kubectl(["apply", "-f", str(path), *scope])
        say(f"applied Job {name}")
        state = _follow(name, plan.nnodes, scope, timeout, say)
        tail = _kubectl(["logs", f"job/{name}", "--tail", "40", *scope], check=False)
        if state in ("timeout", "interrupted"):
            _kubectl(["delete", "-f", str(path), "--wait=false", *scope], check=False)
            return Ran(state, tail.splitlines(), name)
        return Ran(None, tail.splitlines(), name)


def _follow(name: str, pods: int, scope: list[str], timeout: float | None, say: Progress) -> str:
    """Wait for the Job to complete (all ``pods`` succeeded) or fail (one failed: no retries),
    or ``timeout`` / ``interrupted`` when batchspec gives up on it."""
    start, last = time.monotonic(), None
    query = ["get", "job", name, "-o", "jsonpath={.status.succeeded} {.status.failed}", *scope]
    try:
        while True:
            succeeded, _, failed = _kubectl(query).strip().partition(" ")
            current = "Failed" if failed not in ("", "0") else "Running"
            if succeeded == str(pods):
                current = "Complete"
            if current != last:
                say(f"Job {name}: {current}")
                last = current
            if current in ("Complete", "Failed"):
                return current
            if timeout is not None and time.monotonic() - start > timeout:
                return "timeout"
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        return "interrupted"


def _kubectl(argv: list[str], check: bool = True) -> str:
    try:
        done = subprocess.run(["kubectl", *argv], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise InputError("kubectl not found: --launcher k8s needs it") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"kubectl {argv[0]} did not answer within 60 s") from None
    if check and done.returncode:
        raise InputError(f"kubectl {argv[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout
