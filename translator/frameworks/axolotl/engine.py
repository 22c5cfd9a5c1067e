"""Axolotl: the real ``axolotl train <yaml> --launcher python`` on the rendered batch keys.

The rendered file's ``micro_batch_size``, ``gradient_accumulation_steps`` and ``sequence_len``
(read from ``ctx.config``, not from the spec) are run on the tiny local Llama of
:func:`translator.frameworks.axolotl.verdict.make_tiny_model`, with the CPU-safe keys, in one Axolotl
process started as a subprocess (Axolotl's multi-process path forces a CUDA device map).

The synthetic alpaca-style dataset has exactly ``K × micro × accumulation`` rows (one process,
so data-parallel 1), with no ``max_steps``: Axolotl sizes the run from the dataset itself. The
rows are short (a minimal prompt format, well under ``sequence_len``), ``val_set_size`` is 0,
deduplication is off and ``excess_length_strategy: raise`` makes Axolotl fail rather than drop a
row silently. Each row is padded to exactly ``sequence_len`` tokens, and the result reports the
rendered ``sequence_len`` (``--seq-len`` only when the file has none).

A file with ``sample_packing: true`` runs packed, as Axolotl packs on CPU: with ``sdpa`` its
multipack sampler fills bins of ``sequence_len`` tokens, ``micro_batch_size`` bins a
micro-batch, and its collator concatenates each bin's samples (position ids restarting at 0).
The dataset then has enough rows to fill every bin and ``max_steps`` ends the run after the
smoke's steps. A step's samples are counted sample by sample (:func:`packed_samples`) and checked
against the bins the sampler made; the result reports the packed rows per step too (the global
batch counts rows).

Measuring: Axolotl loads :class:`CountingPlugin` (``plugins:`` in the YAML). Inside the Axolotl
process it adds the shared Trainer callback of :mod:`translator.batch.counting` (the counter the
harness and the guard use): a forward pre-hook on the trainer's model counts the rows of every
training forward, and ``on_step_end`` (called by the HF Trainer once per optimizer step, right
after ``optimizer.step()`` and ``global_step += 1``) closes the step: samples fed since the
previous step, and the wall time since the previous ``on_step_end`` (the first from
``on_train_begin``; data loading of a step's batches falls inside it, as in the harness). So
step count, samples per step and step times are all per step, as Axolotl's trainer stepped. The engine cross-checks them with Axolotl's own
account and fails on any disagreement: the step count against the trainer's
``state.global_step``, and the tokens fed in each step against the increase of Axolotl's
``tokens/total`` log entry (``logging_steps: 1``; its ``compute_loss`` adds the ``labels.numel()``
of every training micro-batch). Peak memory is the Axolotl process's: its peak RSS
(``RUSAGE_CHILDREN``) on CPU, its ``torch.cuda.max_memory_allocated`` on GPU.

The model is the job's, built by Axolotl itself with its ``reinit_weights`` switch
(``from_config``, random weights) from a folder holding the job's ``config.json`` and the tiny
tokenizer; or, as the stand-in, the tiny Llama written locally. Nothing is downloaded. Scratch files, the YAML that ran
(``axolotl-smoke.yaml``), Axolotl's output (``axolotl-train.log``) and the per-step report
(``axolotl-steps.json``) stay in ``<results>/axolotl/``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from translator.batch.counting import TrainerCounter
from translator.rank import parity_rank
from translator.rank.context import RunContext
from translator.rank.failure import mentions_out_of_memory

#: Keys of the rendered YAML that are run (everything else is the tiny model's setup).
#: ``batch_size`` is not rendered, but if a file has it, Axolotl must see it too.
RUN_KEYS = (
    "micro_batch_size",
    "gradient_accumulation_steps",
    "batch_size",
    "sequence_len",
    "sample_packing",
)
#: Fewer tokens than any row of the synthetic dataset holds (15 to 20 tokenised): a packed bin
#: of ``sequence_len`` tokens holds at most ``sequence_len // MIN_ROW_TOKENS`` rows.
MIN_ROW_TOKENS = 8
#: Where :class:`CountingPlugin` writes its report (set for the Axolotl process only).
REPORT_ENV = "BATCHSPEC_AXOLOTL_REPORT"
#: Set for a parity run: the folder where the plugin writes the loss and update (as rank 0).
PARITY_ENV = "BATCHSPEC_AXOLOTL_PARITY"
#: What a parity run sets on top (``smoke --parity``): plain SGD, whose update is the gradient
#: (no clipping, weight decay, warm-up or schedule).
PARITY_KEYS = {
    "optimizer": "sgd",
    "learning_rate": 1.0,
    "lr_scheduler": "constant",
    "warmup_steps": 0,
    "max_grad_norm": 0.0,
    "weight_decay": 0.0,
}
#: Seconds ``axolotl train`` may take before it is killed.
TIMEOUT_ENV = "BATCHSPEC_AXOLOTL_TIMEOUT"
DEFAULT_TIMEOUT = 1800.0
#: Launcher variables the Axolotl process must not inherit.
DISTRIBUTED_ENV = {
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
}
#: Name of the plugin class in this module, as Axolotl's ``plugins:`` list spells it.
PLUGIN = f"{__name__}.CountingPlugin"
DATA_FILE = "smoke.jsonl"
CONFIG_FILE = "axolotl-smoke.yaml"
LOG_FILE = "axolotl-train.log"
REPORT_FILE = "axolotl-steps.json"


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout, else None."""
    if spec.world_size != 1:
        return (
            f"the Axolotl smoke engine runs one process (Axolotl's multi-process path needs "
            f"CUDA), not {spec.world_size}; use --nproc-per-node 1 --nnodes 1"
        )
    if spec.pipeline_parallel_size > 1:
        return (
            f"Axolotl has no pipeline parallelism, but the spec asks for pipeline "
            f"{spec.pipeline_parallel_size}"
        )
    return None


def run(ctx: RunContext):
    if ctx.world_size != 1:
        raise RuntimeError(
            f"the Axolotl smoke engine runs one process (Axolotl's multi-process "
            f"path needs CUDA), not {ctx.world_size}"
        )
    if ctx.model_config is None and ctx.model != "tiny":
        raise RuntimeError(
            f"the Axolotl smoke engine runs the job's model or the tiny Llama, not {ctx.model!r}"
        )
    import yaml

    from translator.frameworks.axolotl.verdict import make_tiny_model, write_dataset

    rendered = yaml.safe_load(ctx.config.read_text()) or {}
    keys = {key: rendered[key] for key in RUN_KEYS if key in rendered}
    micro = keys.get("micro_batch_size", 1)
    accumulation = keys.get("gradient_accumulation_steps", 1)
    sequence_len = keys.get("sequence_len", ctx.sequence_length)
    keys["sequence_len"] = sequence_len
    packed = bool(keys.get("sample_packing"))
    rows = ctx.steps * micro * accumulation
    if packed:
        # Enough rows to fill every bin of every step however they pack; max_steps stops the
        # run at ctx.steps (the packed dataset's length is Axolotl's estimate).
        rows *= sequence_len // MIN_ROW_TOKENS
        keys["max_steps"] = ctx.steps

    scratch = Path(ctx.workdir).resolve() / "axolotl"
    scratch.mkdir(parents=True, exist_ok=True)
    if ctx.model_config is None:
        model_dir = make_tiny_model(scratch)
    else:
        model_dir = job_model(scratch, ctx.model_config)
        keys["reinit_weights"] = True  # Axolotl's own switch: from_config, random weights
    write_dataset(scratch / DATA_FILE, rows)
    config = scratch / CONFIG_FILE
    settings = smoke_config(keys, model_dir, scratch) | (PARITY_KEYS if ctx.parity else {})
    config.write_text(yaml.safe_dump(settings, sort_keys=False))

    report_path = scratch / REPORT_FILE
    report_path.unlink(missing_ok=True)
    output = train(config, scratch, report_path, Path(ctx.workdir) if ctx.parity else None)
    if not report_path.exists():
        raise RuntimeError(
            f"axolotl train wrote no step report; see {scratch / LOG_FILE}: {last_line(output)}"
        )
    report = json.loads(report_path.read_text())
    check(report)
    result = ctx.result(
        data_parallel_rank=0,
        counts_samples=True,
        samples_per_step=[step["samples"] for step in report["steps"]],
        packed_rows_per_step=[step["rows"] for step in report["steps"]] if packed else None,
        step_times=[step["seconds"] for step in report["steps"]],
        parameters=report["parameters"],
    )
    peak = (
        report.get("cuda_peak_memory_bytes")
        or resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    )
    return replace(result, peak_memory_bytes=peak, sequence_length=sequence_len)


def job_model(scratch: Path, config: Path) -> Path:
    """A model folder Axolotl builds the job's model from with ``reinit_weights``: the job's
    ``config.json`` and the tiny tokenizer (no weights: none are loaded)."""
    import shutil

    from translator.frameworks.axolotl.verdict import write_tokenizer

    folder = scratch / "job-model"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(config, folder / "config.json")
    write_tokenizer(folder)
    return folder


def check(report: dict) -> None:
    """Raise when the hook's count disagrees with what Axolotl's trainer itself reports (and,
    packed, with the samples its multipack sampler put in each step's bins)."""
    steps = report["steps"]
    if len(steps) != report["global_step"]:
        raise RuntimeError(
            f"counted {len(steps)} optimizer steps but Axolotl's trainer says "
            f"{report['global_step']}"
        )
    before = 0  # Axolotl's running total after the previous step, None when not logged
    for number, step in enumerate(steps, 1):
        total = step.get("axolotl_tokens_total")
        axolotl = None if total is None or before is None else total - before
        before = total
        if axolotl is not None and axolotl != step["tokens"]:
            raise RuntimeError(
                f"step {number}: the model was fed {step['tokens']} tokens "
                f"({step['samples']} samples) but Axolotl counted {axolotl}"
            )
        binned = step.get("axolotl_samples")
        if binned is not None and binned != step["samples"]:
            raise RuntimeError(
                f"step {number}: the model was fed {step['samples']} samples in "
                f"{step['rows']} packed rows but Axolotl's multipack sampler binned {binned}"
            )


def smoke_config(keys: dict, model_dir: Path, scratch: Path) -> dict:
    """A full Axolotl config: the rendered ``keys`` on the tiny model and dataset, CPU-safe."""
    from translator.frameworks.axolotl.verdict import CPU_SAFE

    return {
        "base_model": str(model_dir),
        # The alpaca prompt alone is ~130 tokens of this tokenizer: a minimal format keeps every
        # row (~25 tokens) inside any reasonable sequence_len.
        "datasets": [
            {
                "path": str(scratch / DATA_FILE),
                "ds_type": "json",
                "type": {
                    "field_instruction": "instruction",
                    "field_input": "input",
                    "field_output": "output",
                    "format": "{instruction}\n{input}\n",
                    "no_input_format": "{instruction}\n",
                },
            }
        ],
        "dataset_prepared_path": str(scratch / "prepared"),
        "output_dir": str(scratch / "out"),
        **CPU_SAFE,
        "val_set_size": 0,
        # Unset, Axolotl shuffles the dataset with no seed (a new order every run, so the two
        # runs of a parity check would not see the same samples); 42 is also the Trainer's
        # default seed, so nothing else changes.
        "seed": 42,
        "dataset_exact_deduplication": False,
        "excess_length_strategy": "raise",
        "pad_to_sequence_len": True,
        "pad_to_multiple_of": keys["sequence_len"],
        "logging_steps": 1,
        "include_tkps": True,
        "plugins": [PLUGIN],
        **keys,
    }


def train(config: Path, scratch: Path, report_path: Path, parity: Path | None = None) -> str:
    """Run ``axolotl train CONFIG --launcher python``; returns its output, raises on failure.
    ``parity``: the folder where the plugin writes a parity run's loss and update."""
    from translator.frameworks.axolotl.verdict import OFFLINE_ENV

    # A plain single process: with the launcher's RANK/LOCAL_RANK/WORLD_SIZE set, Accelerate
    # would start a one-rank process group (and want MASTER_ADDR) even on CPU.
    env = {key: value for key, value in os.environ.items() if key not in DISTRIBUTED_ENV}
    env.update(
        OFFLINE_ENV,
        PYTHONUNBUFFERED="1",
        TOKENIZERS_PARALLELISM="false",
        **{REPORT_ENV: str(report_path)},
    )
    if parity is not None:
        env[PARITY_ENV] = str(parity)
    # The Axolotl process imports this module (the plugin): make sure it finds the package.
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    command = [
        sys.executable,
        "-m",
        "axolotl.cli.main",
        "train",
        str(config),
        "--launcher",
        "python",
    ]
    timeout = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT))
    try:
        proc = subprocess.run(
            command,
            cwd=scratch,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.output or ""
        (scratch / LOG_FILE).write_text(output if isinstance(output, str) else output.decode())
        raise RuntimeError(f"axolotl train timed out after {timeout:g} s") from None
    (scratch / LOG_FILE).write_text(proc.stdout)
    if proc.returncode != 0:
        if mentions_out_of_memory(proc.stdout):
            raise MemoryError(f"axolotl train ran out of memory: {last_line(proc.stdout)}")
        raise RuntimeError(f"axolotl train exited with {proc.returncode}: {last_line(proc.stdout)}")
    return proc.stdout


def fed_samples(inputs: dict, packed: bool) -> list:
    """The samples of the model's ``inputs`` (a forward's keyword arguments): each row, or with
    ``packed`` the :func:`packed_samples` of the rows."""
    if not packed:
        return list(inputs["input_ids"])
    if inputs.get("position_ids") is None:
        raise RuntimeError("sample_packing is on, but the model got no position_ids")
    return packed_samples(inputs["input_ids"], inputs["position_ids"], inputs["labels"])


def packed_samples(ids, positions, labels) -> list:
    """The samples of packed rows (each sample's tokens): the runs of ``positions`` that start
    at 0 and hold a predicted token (a label other than -100). Axolotl's collator pads a bin
    with positions counting from 0 again and labels -100: a run with nothing predicted."""
    samples = []
    for row, position, label in zip(ids, positions, labels, strict=True):
        starts = [*(position == 0).nonzero().flatten().tolist(), len(position)]
        samples += [row[a:b] for a, b in zip(starts, starts[1:]) if (label[a:b] != -100).any()]
    return samples


def binned_samples(sampler, step: int, accumulation: int) -> int:
    """The samples Axolotl's ``MultipackBatchSampler`` put into the bins of optimizer step
    ``step`` (from 0): its batches (``micro_batch_size`` bins each, a bin a list of dataset
    indices) as it yields them, ``accumulation`` to a step."""
    # _batches is the sampler's cache of what its __iter__ yields this epoch (no public view).
    batches = sampler._batches[step * accumulation : (step + 1) * accumulation]
    return sum(len(bin_) for batch in batches for bin_ in batch)


def multipack_sampler(loader):
    """The ``MultipackBatchSampler`` behind the Trainer's (prepared) train dataloader."""
    for _ in range(4):
        if hasattr(loader, "generate_batches"):
            return loader
        loader = getattr(loader, "batch_sampler", None)
    raise RuntimeError("sample_packing is on, but the train dataloader has no multipack sampler")


def last_line(output: str) -> str:
    """The last error-looking line of a log, else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "error:" in line]
    return (errors or lines or ["(no output)"])[-1]


def report_steps(counter) -> list[dict]:
    """The closed steps of the plugin's counter, each with what Axolotl says of it: its running
    ``tokens/total`` as logged, and packed, the samples its sampler binned."""
    steps = [
        {"samples": samples, "rows": rows, "tokens": tokens, "seconds": seconds}
        for samples, rows, tokens, seconds in zip(
            counter.samples, counter.rows, counter.tokens, counter.times
        )
    ]
    for index, total in counter.axolotl_totals.items():
        steps[index]["axolotl_tokens_total"] = total
    for index, binned in counter.binned.items():
        steps[index]["axolotl_samples"] = binned
    return steps


# --- Inside the Axolotl process -------------------------------------------------------------


class StepReport(TrainerCounter):
    """The counter, with Axolotl's own account beside it, written after every step (the Trainer
    callback :class:`CountingPlugin` adds inside the Axolotl process)."""

    def __init__(self, model, path: Path, packed: bool):
        super().__init__()
        self.path = path
        self.packed = packed
        """Axolotl packs several samples into a row (``sample_packing``)."""
        self.sampler = None
        """Axolotl's multipack sampler, when packed."""
        self.binned: dict[int, int] = {}
        """The samples the sampler binned into each step (by the step's index)."""
        self.first: list[bytes] = []
        """The samples of the first step (their tokens' bytes), for a parity run."""
        self.parameters = sum(p.numel() for p in model.parameters())
        self.global_step = 0
        self.runtime: float | None = None
        self.axolotl_totals: dict[int, int] = {}
        """Axolotl's ``tokens/total`` after each step (by the step's index), as logged."""
        self.model = model
        self.before: dict | None = None
        """A parity run's weights before the first step."""
        self.loss: float | None = None
        """The trainer's loss of the run, as logged."""

    def forward(self, module, args, kwargs):
        if not (module.training and self.counting):
            return
        samples = fed_samples(kwargs, self.packed)
        self.add(kwargs["input_ids"], len(samples))
        if not self.samples:  # no step closed yet: the first
            self.first += [sample.cpu().numpy().tobytes() for sample in samples]

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.packed:
            self.sampler = multipack_sampler(kwargs.get("train_dataloader"))
        if os.environ.get(PARITY_ENV):
            self.before = parity_rank.snapshot(self.model.named_parameters())
        self.restart_clock()  # the first step's time runs from the start of training
        return super().on_train_begin(args, state, control, model=model, **kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        super().on_step_end(args, state, control, **kwargs)
        if self.sampler is not None:
            step = len(self.samples) - 1
            accumulation = args.gradient_accumulation_steps
            self.binned[step] = binned_samples(self.sampler, step, accumulation)
        self.global_step = state.global_step
        self.write()
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        # Axolotl's own running count of token slots trained on (its compute_loss adds
        # labels.numel() of every training micro-batch), logged after each step.
        logs = logs or {}
        if "tokens/total" in logs and self.samples and state.global_step == len(self.samples):
            self.axolotl_totals[len(self.samples) - 1] = int(logs["tokens/total"])
        if "train_runtime" in logs:
            self.runtime = float(logs["train_runtime"])
        if "train_loss" in logs:
            self.loss = float(logs["train_loss"])
        self.write()
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self.stop()
        self.global_step = state.global_step
        self.write()
        folder = os.environ.get(PARITY_ENV)
        if folder and self.loss is not None:
            named = self.model.named_parameters()
            held = parity_rank.held(self.first)
            parity_rank.write(Path(folder), 0, self.loss, self.before, named, held)
        return control

    def write(self):
        report = {
            "steps": report_steps(self),
            "global_step": self.global_step,
            "parameters": self.parameters,
            "train_runtime": self.runtime,
        }
        import torch

        if torch.cuda.is_available():
            report["cuda_peak_memory_bytes"] = int(torch.cuda.max_memory_allocated())
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(report))
        tmp.replace(self.path)


def _plugin_class():
    """:class:`CountingPlugin`, built on first use (it subclasses Axolotl's ``BasePlugin``)."""
    from axolotl.integrations.base import BasePlugin

    class CountingPlugin(BasePlugin):
        """Adds :class:`StepReport` to Axolotl's trainer."""

        def add_callbacks_post_trainer(self, cfg, trainer):
            report = Path(os.environ[REPORT_ENV])
            return [StepReport(trainer.model, report, bool(cfg.sample_packing))]

    return CountingPlugin


def __getattr__(name: str):
    # Axolotl's load_plugin does getattr(module, "CountingPlugin"): build it lazily so that
    # importing this module needs neither Axolotl nor torch.
    if name == "CountingPlugin":
        cls = _plugin_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
