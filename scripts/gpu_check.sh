#!/usr/bin/env bash
# The GPU check of the smoke engines and of tune, on one GPU, in two parts (each under 10
# minutes; `all`, the default, runs both):
#   engines  the torch, DeepSpeed and Megatron engines on the 125m stand-in in bf16 (5 optimizer
#            steps, 1024 tokens per sample), each run's samples per step checked by batchspec
#            itself, then tokens/s, MFU and peak memory; nanotron's (GPU-only) samples per step
#            where flash-attn is installed.
#   job      a user's job on a Llama-3.2-1B-shaped model (its config.json, random weights): an
#            HF Trainer job under DeepSpeed ZeRO-2 and the same job under torchrun DDP, each
#            tuned to its out-of-memory edge at global batch 32 of 4,096 tokens (the probes'
#            tokens/s, MFU, peak memory beside the estimate, allocator retries, the pick).
# The README's GPU figures come only from this script, with the GPU it names.
# Run from the repository root, in an environment with batchspec[test] installed:
#   bash scripts/gpu_check.sh [OUT_DIR] [engines|job|all]      (PYTHON=... picks the interpreter)
set -uo pipefail
out="${1:-gpu-check}"
part="${2:-all}"
PYTHON="${PYTHON:-python}"
mkdir -p "$out"
"$PYTHON" - <<'PY' || { echo "gpu_check: no CUDA GPU visible; nothing to check" >&2; exit 2; }
import sys, torch
sys.exit(0 if torch.cuda.is_available() else 1)
PY
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"

status=0
engines() {
cat > "$out/spec.yaml" <<'YAML'
global_batch_size: 16
micro_batch_size: 4
sequence_length: 1024
YAML

for engine in torch deepspeed megatron; do
  # 100 s per engine leaves room for the three under 6 minutes, start-up included.
  timeout 110 "$PYTHON" -m translator smoke "$out/spec.yaml" --framework "$engine" --model 125m \
    --device gpu --nproc 1 --steps 5 --timeout 100 --workdir "$out/$engine" --json \
    > "$out/$engine.json" 2> "$out/$engine.log"
  code=$?
  "$PYTHON" - "$engine" "$out/$engine.json" "$code" <<'PY'
import json, sys
engine, path, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    out = json.load(open(path))
except (OSError, ValueError):
    print(f"{engine:10} exit {code}: no result (see its .log)")
    sys.exit(0)
mfu = f"{out['mfu']:.1%}" if out.get("mfu") is not None else "-"
print(f"{engine:10} exit {code}  {out['device']}  samples/step "
      f"{out['samples_per_optimizer_step']}  tokens/s {out['tokens_per_second'] or 0:,.0f}  "
      f"MFU {mfu}  peak {out['peak_memory_bytes'] / 2**30:.2f} GiB"
      + (f"  errors: {out['errors']}" if out.get("errors") else ""))
PY
  [ "$code" -eq 0 ] || status=1
done

# nanotron trains on GPUs only (its smoke engine refuses a CPU) and imports flash-attn, which no
# extra installs: without it the engine is reported as not run, not as a failure.
if "$PYTHON" -c "import flash_attn" 2>/dev/null; then
  timeout 100 "$PYTHON" -m translator smoke "$out/spec.yaml" --framework nanotron --model 125m \
    --device gpu --nproc 1 --steps 5 --timeout 90 --workdir "$out/nanotron" --json \
    > "$out/nanotron.json" 2> "$out/nanotron.log"
  code=$?
  "$PYTHON" - "$out/nanotron.json" "$code" <<'PY'
import json, sys
path, code = sys.argv[1], int(sys.argv[2])
try:
    out = json.load(open(path))
except (OSError, ValueError):
    print(f"nanotron   exit {code}: no result (see its .log)")
    sys.exit(0)
print(f"nanotron   exit {code}  {out['device']}  samples/step {out['samples_per_optimizer_step']}"
      + (f"  errors: {out['errors']}" if out.get("errors") else ""))
PY
  [ "$code" -eq 0 ] || status=1
else
  echo "nanotron   not run: flash_attn is not installed (pip install flash-attn)"
fi

}

# The job of a user: its model named by a folder holding a Llama-3.2-1B config.json.
job() {
  local dir="$out/job"
  mkdir -p "$dir/llama-1b"
  cat > "$dir/llama-1b/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
 "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
 "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
 "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
 "tie_word_embeddings": true, "hidden_act": "silu", "torch_dtype": "bfloat16"}
JSON
  cat > "$dir/zero2.json" <<'JSON'
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"},
 "zero_optimization": {"stage": 2, "overlap_comm": true, "contiguous_gradients": true}}
JSON
  cat > "$dir/zero2.sh" <<'SH'
deepspeed --num_gpus 1 train.py --deepspeed zero2.json --model_name_or_path ./llama-1b \
    --bf16 True --output_dir ./out --per_device_train_batch_size 4 \
    --gradient_accumulation_steps 8 --learning_rate 1e-5
SH
  sed -e 's/^deepspeed --num_gpus 1 train.py --deepspeed zero2.json/torchrun --nproc_per_node 1 train.py/' \
    "$dir/zero2.sh" > "$dir/ddp.sh"
  for name in zero2 ddp; do
    # 220 s each: 5 probes of 3 steps (32 × 4,096 tokens a step) and their start-ups.
    (cd "$dir" && timeout 230 "$PYTHON" -m translator tune "$name.sh" --seq-len 4096 \
      --device gpu --steps 3 --probe-timeout 120 --timeout 220 --no-parity \
      --workdir "tune-$name" --json > "tune-$name.json" 2> "tune-$name.log")
    code=$?
    "$PYTHON" - "$name" "$dir/tune-$name.json" "$code" <<'PY'
import json, sys
name, path, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    out = json.load(open(path))
except (OSError, ValueError):
    print(f"{name:6} exit {code}: no result (see tune-{name}.log)")
    sys.exit(0)
engine, model = out.get("engine") or {}, out["model"]
print(f"{name:6} {engine.get('framework')} ZeRO {engine.get('deepspeed_zero_stage')}  "
      f"{model['architecture']} {model['parameters'] or 0:,} parameters")
for p in out["probes"]:
    est, peak = p["estimated_memory_bytes"] or 0, p["peak_memory_bytes"] or 0
    retries = max((r["allocator_retries"] or 0 for r in p["memory_by_rank"]), default=0)
    mfu = f"{p['mfu']:.1%}" if p.get("mfu") is not None else "-"
    spread = f"{p['step_time_spread']:.0%}" if p.get("step_time_spread") is not None else "-"
    print(f"  micro {p['micro_batch_size']:>3} x {p['gradient_accumulation_steps']:>3}  "
          f"samples/step {p['samples_per_optimizer_step']}  tokens/s "
          f"{p['tokens_per_second'] or 0:,.0f} (spread {spread})  MFU {mfu}  peak "
          f"{peak / 2**30:.1f} GiB  estimate {est / 2**30:.1f} GiB  retries {retries}"
          + ("  OOM" if p["out_of_memory"] else ""))
pick = out["pick"] or {}
print(f"{name:6} exit {code}  pick micro {pick.get('micro_batch_size')} x "
      f"{pick.get('gradient_accumulation_steps')}  {out['probes_used']}/{out['budget']} probes "
      f"in {out['seconds']} s; {out['reason']}")
PY
    [ "$code" -eq 0 ] || status=1
  done
}

case "$part" in
  engines) engines ;;
  job) job ;;
  all) engines; job ;;
  *) echo "gpu_check: the part is engines, job or all, not $part" >&2; exit 2 ;;
esac
exit $status
