"""How a tune's outcome looks outside JSON: the probes as a table, tokens/s as bars, the pick and
why (for a terminal), and tokens/s and peak memory against micro-batch as a PNG (``--plot``)."""

from __future__ import annotations

from pathlib import Path

from translator.model.memory import GIB


def mib(n) -> str:
    return "-" if not n else f"{n / 2**20:,.0f} MiB"


def text(out: dict) -> str:
    """The terminal form of a tune's output (``out``: what --json prints), findings aside."""
    from translator.launch.preparing import engine_words
    from translator.launch.run_model import line

    lines = [line(out["model"])]
    if out.get("engine"):
        lines.append(f"engine: {engine_words(out['engine'])}")
    elsewhere = out["candidates_for"]["world_size"] != out["probed_on"]["world_size"]
    lines.append(worlds_line(out))
    lines += [*_table(out["probes"], out["memory_fit"], elsewhere), *_bars(out["probes"])]
    lines.append(
        f"{out['probes_used']} probe(s) of at most {out['budget']} ({out['divisors']} "
        f"micro-batches keep the global batch), {out['seconds']:.1f} s"
        + (f", Slurm job {out['slurm_job']}" if out.get("slurm_job") else "")
    )
    pick = out["pick"]
    if pick:
        lines.append(
            f"pick: micro-batch {pick['micro_batch_size']} × accumulation "
            f"{pick['gradient_accumulation_steps']} × data-parallel "
            f"{pick['data_parallel_size']} = {pick['global_batch_size']}"
        )
    lines.append(f"why: {out['reason']}")
    lines += [f"wrote {path} ({name})" for name, path in out["files"].items()]
    checked = parity_line(out.get("parity"))
    return "\n".join(lines + ([checked] if checked else []))


def worlds_line(out: dict) -> str:
    """The world whose global batch the candidates keep (the job's) and the one probed."""
    from translator.words.findings import counted

    job, probed = out["candidates_for"], out["probed_on"]
    g, world, dp = job["global_batch_size"], job["world_size"], job["data_parallel_size"]
    where = f"{counted(probed['nodes'], 'node')} × {probed['nproc_per_node']}"
    keep = f"candidates: the micro-batches that keep global batch {g} on "
    if world == probed["world_size"]:
        return f"{keep}{world} ranks (data-parallel {dp}), probed there ({where})"
    return (
        f"{keep}the job's {world} ranks (data-parallel {dp}); probed on {where} (data-parallel "
        f"{probed['data_parallel_size']}), each with its accumulation re-solved to keep {g}: "
        "tokens/s and peak memory are those ranks'"
    )


def parity_line(out: dict | None) -> str | None:
    """The parity check of the pick in one line (None when none was asked)."""
    if not out:
        return None
    if not out["checked"]:
        return f"parity: not checked ({out['why']})"
    if out["parity"]:
        from translator.launch.parity_compare import summary

        return "parity: " + summary(out)
    return "parity: fails: " + "; ".join(out["errors"])


def _table(probes: list[dict], fit: dict | None, elsewhere: bool) -> list[str]:
    """The probes (``Probe.as_dict()``) as aligned columns, with the fitted memory;
    ``elsewhere``: probed on another world than the job's, with the accumulation they ran."""
    rows = [
        (
            "micro",
            "accum",
            *(("probed accum",) if elsewhere else ()),
            "recompute",
            "tokens/s",
            "step s",
            "spread",
            "peak",
            "estimate",
            "fitted",
            "OOM",
        )
    ]
    for p in probes:
        micro = p["micro_batch_size"]
        fitted = (
            fit["fixed_bytes"] + fit["bytes_per_sample"] * micro
            if fit and not p["recompute"]
            else None
        )
        tokens, step, spread = p["tokens_per_second"], p["step_time_seconds"], p["step_time_spread"]
        rows.append(
            (
                str(micro),
                str(p["gradient_accumulation_steps"]),
                *((str(p["probed_accumulation"]),) if elsewhere else ()),
                "yes" if p["recompute"] else "no",
                "-" if tokens is None else f"{tokens:,.0f}",
                "-" if step is None else f"{step:.3f}",
                "-" if spread is None else f"{spread:.0%}",
                mib(p["peak_memory_bytes"]),
                mib(p["estimated_memory_bytes"]),
                mib(fitted),
                "yes" if p["out_of_memory"] else "edge" if p["at_memory_edge"] else "no",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]


def _bars(probes: list[dict]) -> list[str]:
    """tokens/s per probed micro-batch as bars (the PNG needs matplotlib)."""
    ran = sorted(
        (p["micro_batch_size"], p["tokens_per_second"] or 0.0) for p in probes if not p["recompute"]
    )
    top = max((t for _, t in ran), default=0.0) or 1.0
    lines = ["tokens/s by micro-batch (# = ran, x = out of memory):"]
    for micro, tokens in ran:
        lines.append(
            f"  {micro:>6}  {'#' * round(40 * tokens / top)} {tokens:,.0f}"
            if tokens
            else f"  {micro:>6}  x"
        )
    return lines


def plot_png(result, path: str, global_batch: int) -> None:
    """tokens/s and peak memory against micro-batch of the probes that ran, as a PNG at ``path``."""
    import io

    import matplotlib

    from translator.words.files import write_files

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran = sorted(
        (p.candidate.micro_batch_size, p.tokens_per_second, p.peak_memory_bytes)
        for p in result.probes
        if not p.out_of_memory and not p.candidate.recompute
    )
    fig, speed = plt.subplots(figsize=(6, 4))
    speed.plot([m for m, _, _ in ran], [t for _, t, _ in ran], "o-", label="tokens/s")
    speed.set_xscale("log", base=2)
    speed.set_xlabel("micro-batch")
    speed.set_ylabel("tokens/s")
    memory = speed.twinx()
    memory.plot(
        [m for m, _, _ in ran],
        [(b or 0) / GIB for _, _, b in ran],
        "s--",
        color="C1",
        label="peak memory",
    )
    memory.set_ylabel("peak memory (GiB)")
    speed.set_title(f"batchspec tune: every micro-batch keeps global batch {global_batch}")
    fig.legend(loc="lower right")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    write_files([(Path(path), buffer.getvalue())], force=True)
