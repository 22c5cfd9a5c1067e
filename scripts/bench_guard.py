"""The guard's cost: a real transformers Trainer (tiny GPT-2, CPU, one process), the same
steps with and without BatchGuard checking every step; prints milliseconds per step and the
difference. Run: python scripts/bench_guard.py [--steps N]"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch
import transformers

from translator.guard import BatchGuard


def seconds_per_step(steps: int, guard: BatchGuard | None) -> float:
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    data = [
        {"input_ids": ids, "labels": ids} for ids in torch.randint(0, 512, (4096, 64)).unbind(0)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        args = transformers.TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=8,
            gradient_accumulation_steps=2,
            max_steps=steps,
            use_cpu=True,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
        )
        trainer = transformers.Trainer(
            model=model, args=args, train_dataset=data, callbacks=[guard] if guard else None
        )
        start = time.perf_counter()
        trainer.train()
        return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    steps = parser.parse_args().steps
    seconds_per_step(5, None)  # warm-up: imports, first allocations
    runs = {"without": [], "with": []}
    for _ in range(3):  # interleaved, to share the machine's drift
        runs["without"].append(seconds_per_step(steps, None))
        runs["with"].append(seconds_per_step(steps, BatchGuard(16, steps=steps)))
    bare, guarded = min(runs["without"]), min(runs["with"])
    print(
        f"Trainer step (best of 3 runs of {steps} steps): without the guard "
        f"{bare * 1e3:.2f} ms, with it checking every step {guarded * 1e3:.2f} ms, "
        f"difference {(guarded - bare) * 1e3:+.2f} ms ({(guarded / bare - 1) * 100:+.1f} %)"
    )


if __name__ == "__main__":
    main()
