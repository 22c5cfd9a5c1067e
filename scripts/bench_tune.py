"""Benchmark of ``batchspec tune`` against the exhaustive sweep and the doubling strategy, in one
run on this machine's CPUs (2 ranks, the torch engine, real probes).

For each case it prints the probes, wall time and pick of each strategy, the pick's tokens/s as
a fraction of the sweep's best, and the memory estimate beside the measured peak of every sweep
probe. The yardstick for all three is the sweep's tokens/s of each micro-batch, averaged over
``--repeats`` sweeps: one probe of the same layout varies by 2-7 % from run to run on this CPU,
so a single sweep's "best" is partly the luckiest measurement.

    python scripts/bench_tune.py [--steps 8] [--repeats 3] [--cases tiny-64,...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from translator.batch import tuning
from translator.launch import probes
from translator.launch.command import SmokePlan
from translator.launch.run_model import RunModel
from translator.model import memory
from translator.model.named_model import NamedModel
from translator.spec import BatchSpec

#: The tiny Llama of issue 27 (2 layers × 64, 4 heads, 2 KV heads, FFN 172, vocab 512): a job's
#: own model, built from its config.json by transformers, as tune builds a job's model.
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 172,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 512,
    "tie_word_embeddings": False,
}
#: name -> (model, sequence length, global batch, memory limit per rank); ``llama`` is
#: :data:`TINY_LLAMA`, the others the stand-ins built in code.
CASES = {
    "llama-64": ("llama", 64, 128, None),
    "tiny-64": ("tiny", 64, 128, None),
    "tiny-512-capped": ("tiny", 512, 128, 1300 * 2**20),
    "tiny-256-g96": ("tiny", 256, 96, None),
    # Not in the default run: 2 CPU ranks take ~35 min for its 13 probes.
    "125m-128": ("125m", 128, 32, None),
}
DEFAULT = "llama-64,tiny-512-capped,tiny-256-g96"
THRESHOLD = 0.03


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per probe")
    parser.add_argument("--repeats", type=int, default=3, help="sweeps averaged")
    parser.add_argument("--cases", default=DEFAULT, help=f"some of {', '.join(CASES)}")
    args = parser.parse_args()
    for name in args.cases.split(","):
        bench(name, *CASES[name], args.steps, args.repeats)


def bench(
    name: str, model: str, seq: int, global_batch: int, limit: int | None, steps: int, repeats: int
):
    spec = BatchSpec(
        global_batch_size=global_batch, world_size=2, sequence_length=seq, micro_batch_size=1
    )
    per_rank = global_batch // 2
    with tempfile.TemporaryDirectory() as tmp:

        def setup(tag: str) -> probes.Setup:
            plan = SmokePlan(
                framework="torch",
                nproc=2,
                nnodes=1,
                steps=steps,
                model="tiny" if model == "llama" else model,
                sequence_length=seq,
                workdir=Path(tmp) / tag,
                config_name="",
                device="cpu",
            )
            return probes.Setup(spec, plan, limit, model=job_model(model))

        # what tune itself estimates on CPU: fp32, no fixed overhead
        estimated = probes.estimator(
            setup("estimate"), precision="fp32", attention="flash", overhead=0
        )

        def prober(tag: str):
            return lambda c: probes.run_probe(setup(tag), c, estimated(c), lambda line: None)

        ladder = [tuning.Candidate(b, per_rank // b) for b in tuning.divisors(per_rank)]
        start = time.monotonic()
        sweeps = [[prober(f"sweep{i}")(c) for c in ladder] for i in range(repeats)]
        sweep_time = (time.monotonic() - start) / repeats
        sweep = sweeps[0]
        measured = {
            c.micro_batch_size: statistics.mean(s[i].tokens_per_second or 0.0 for s in sweeps)
            for i, c in enumerate(ladder)
        }
        ran = [
            [s[i].tokens_per_second for s in sweeps if not s[i].out_of_memory]
            for i in range(len(ladder))
        ]
        spread = max(
            ((max(r) - min(r)) / statistics.mean(r) for r in ran if len(r) > 1), default=0.0
        )
        ooms = {
            c.micro_batch_size: sum(s[i].out_of_memory for s in sweeps)
            for i, c in enumerate(ladder)
        }
        best = max(measured.values())

        start = time.monotonic()
        capacity = limit
        fits = (lambda c: None) if capacity is None else (lambda c: estimated(c) <= capacity)
        found = tuning.search(per_rank, [(False, None)], fits, prober("tune"), THRESHOLD)
        tune_time = time.monotonic() - start

        start = time.monotonic()
        doubling = doubling_search(per_rank, prober("doubling"))
        doubling_time = time.monotonic() - start

    print(
        f"\n== {name}: model {model}, sequence {seq}, global batch {global_batch} on 2 CPU "
        f"ranks, memory limit {limit and f'{limit / 2**20:.0f} MiB' or 'none'}, {steps} steps "
        f"per probe; {len(ladder)} divisors, tune budget {tuning.budget(len(ladder))}; "
        f"yardstick: the mean of {repeats} sweeps (largest spread of one layout that ran "
        f"{spread:.1%}); sweep wall time is one sweep's"
    )
    print(
        f"{'strategy':<10} {'probes':>6} {'wall s':>7} {'pick':>5} {'pick tokens/s':>14} "
        f"{'of sweep best':>13}"
    )
    for label, picked, count, seconds in (
        ("sweep", max(measured, key=measured.get), len(sweep), sweep_time),
        (
            "tune",
            found.pick and found.pick.candidate.micro_batch_size,
            len(found.probes),
            tune_time,
        ),
        ("doubling", doubling[0], doubling[1], doubling_time),
    ):
        value = measured.get(picked, 0.0)
        print(
            f"{label:<10} {count:>6} {seconds:>7.1f} {picked or '-':>5} {value:>14,.0f} "
            f"{value / best:>12.1%}"
        )
    print(f"tune's probes: {', '.join(describe(p) for p in found.probes)}")
    print(
        "sweep probes: micro, mean tokens/s, measured peak, estimate (analytic, no fixed overhead)"
    )
    for p in sweep:
        peak = f"{p.peak_memory_bytes / 2**20:,.0f} MiB" if p.peak_memory_bytes else "-"
        micro = p.candidate.micro_batch_size
        oom = (
            f"  (out of memory in {ooms[micro]} of {repeats} sweeps, counted as 0)"
            if 0 < ooms[micro] < repeats
            else ""
        )
        print(
            f"  {micro:>5} {measured[micro]:>10,.0f} {'OOM' if p.out_of_memory else peak:>10} "
            f"{p.estimated_memory_bytes / 2**20:>9,.0f} MiB{oom}"
        )


def job_model(model: str) -> RunModel | None:
    """The job's model tune builds for ``llama`` (None: the stand-in of that name)."""
    if model != "llama":
        return None
    shape = memory.hf_shape(TINY_LLAMA, "bench", "tiny llama")
    named = NamedModel("bench_tune.TINY_LLAMA", "config.json", "LlamaForCausalLM", shape)
    return RunModel(shape, TINY_LLAMA, named)


def describe(p) -> str:
    return f"{p.candidate.micro_batch_size} " + (
        "OOM" if p.out_of_memory else f"{p.tokens_per_second:,.0f}/s"
    )


def doubling_search(per_rank: int, probe) -> tuple[int | None, int]:
    """What users do by hand: micro-batch 1, 2, 4... (those that divide), until out of memory
    or a doubling gains less than the threshold; the fastest wins. Returns (pick, probes)."""
    results, b = {}, 1
    while b <= per_rank and per_rank % b == 0:
        p = probe(tuning.Candidate(b, per_rank // b))
        if p.out_of_memory:
            break
        results[b] = p.tokens_per_second or 0.0
        if len(results) > 1 and results[b] < results[b // 2] * (1 + THRESHOLD):
            break
        b *= 2
    pick = max(results, key=results.get) if results else None
    return pick, len(results) + (
        1 if b <= per_rank and per_rank % b == 0 and b not in results else 0
    )


if __name__ == "__main__":
    main()
