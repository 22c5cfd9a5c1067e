"""Job definitions: a scheduler's description of a job, read as a launcher.

A Kubernetes manifest (``batch/v1`` Job, Kubeflow ``PyTorchJob`` and ``TrainJob``, JobSet), a
SkyPilot task or a dstack task says how many nodes run the job, the GPUs each gets, the
variables the system sets and the command each node runs. That command is read as the launch
script it is (:func:`translator.job.script.read_job`: launcher → program → flags → files), in the
environment the system gives it; the reading names the definition and its layout.

A file is claimed here before any framework looks at it: a manifest whose command runs
``accelerate launch train.py --per_device_train_batch_size 2`` holds no HF config, and read as
one its Trainer's defaults would be numbers the job never runs.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from translator.job.definitions import dstack, kubernetes, skypilot
from translator.job.definitions import nodes as n
from translator.job.definitions.runs import Run, TooLarge
from translator.job.definitions.seam import read_runs
from translator.job.script import RunAs
from translator.plugin.contract import Framework
from translator.reading import Reading
from translator.words import collector
from translator.words.errors import InputError

#: File names of YAML, and of YAML templates filled before use (``job.yaml-template``,
#: ``job.yaml.tpl``).
YAML_NAME = re.compile(r"\.ya?ml(?:[-.](?:template|tmpl|tpl|in|j2))?$", re.IGNORECASE)
#: Text that may start one: a Kubernetes object, a SkyPilot ``run``, a dstack task (also
#: written as JSON, whose keys are quoted and indented, or after a byte-order mark).
MARKERS = re.compile(
    r"""^\ufeff?[ \t{]*["']?(?:(?:apiVersion|kind|run)["']?\s*:|type["']?\s*:\s*['"]?task)""",
    re.MULTILINE,
)


def system_of(path: str, text: str) -> str | None:
    """The system a YAML file is a job definition for (``kubernetes``, ``skypilot``,
    ``dstack``), or ``None``: not one, or not YAML (its reader says why)."""
    if not YAML_NAME.search(Path(path).name) or not MARKERS.search(text):
        return None
    try:
        docs = n.documents(n.unhelm(text)[0], path)
    except InputError:
        return None
    if any(kubernetes.is_manifest(d) for d in docs):
        return "kubernetes"
    if len(docs) == 1 and skypilot.is_task(docs[0]):
        return "skypilot"
    if len(docs) == 1 and dstack.is_task(docs[0]):
        return "dstack"
    return None


def read_definition(
    path: str, text: str, run_as: RunAs | None = None, framework: str | None = None
) -> tuple[Framework, Reading]:
    """The job a definition runs, read by the framework whose program its command launches
    (``framework`` when given). The garbage collector is paused meanwhile
    (:mod:`translator.words.collector`): a file of many jobs makes many objects."""
    run_as = run_as or RunAs()
    with collector.paused():
        plain, helm = n.unhelm(text)
        runs, run_as = _runs(path, plain, system_of(path, text), run_as)
        left = [h for h in helm if h not in run_as.environment]
        if left:
            for run in runs:
                run.notes.append(
                    f"a Helm chart's template: its values ({', '.join(left)}) are unknown "
                    "here; give them with --env"
                )
        # a Helm template's literals are not where its rendered text has them: none is edited
        return read_runs(path, text, runs, run_as, framework, editable=plain == text)


def _runs(path: str, plain: str, system: str | None, run_as: RunAs) -> tuple[list[Run], RunAs]:
    """What each node of the definition (``plain``: its text, Helm's placeholders made
    variables) runs, and how the job runs with it (a SkyPilot task's mounts); a count past
    any cluster's is an input error naming the file and line."""
    env = dict(run_as.environment)
    docs = n.documents(plain, path)
    try:
        if system == "kubernetes":
            return kubernetes.runs(docs, path, env, plain), run_as
        if system == "skypilot":
            task, mounts = skypilot.run(docs[0], path, env)
            return [task], dataclasses.replace(run_as, mounts={**mounts, **run_as.mounts})
        return [dstack.run(docs[0], env)], run_as
    except TooLarge as exc:
        raise InputError(f"{path}:{exc.line}: {exc}" if exc.line else f"{path}: {exc}") from None
