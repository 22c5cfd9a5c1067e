#!/usr/bin/env bash
# The GPU check of the smoke engines and of tune, at most 10 minutes on one GPU: the torch,
# DeepSpeed and Megatron engines on the 125m model in bf16 (5 optimizer steps, 1024 tokens per
# sample), each run's samples per step checked by batchspec itself, then tokens/s, MFU and peak
# memory; nanotron's (GPU-only) samples per step where flash-attn is installed; then `tune` of the 125m model at global batch 64 (its probes, pick, and the memory
# estimate beside the measured peak).
# The README's GPU figures come only from this script, with the GPU it names.
# Run from the repository root, in an environment with batchspec[test] installed:
#   bash scripts/gpu_check.sh [OUT_DIR]      (PYTHON=... picks the interpreter)
set -uo pipefail
out="${1:-gpu-check}"
PYTHON="${PYTHON:-python}"
mkdir -p "$out"
"$PYTHON" - <<'PY' || { echo "gpu_check: no CUDA GPU visible; nothing to check" >&2; exit 2; }
import sys, torch
sys.exit(0 if torch.cuda.is_available() else 1)
PY
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"

cat > "$out/spec.yaml" <<'YAML'
global_batch_size: 16
micro_batch_size: 4
sequence_length: 1024
YAML

status=0
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

cat > "$out/tune.yaml" <<'YAML'
global_batch_size: 64
sequence_length: 1024
YAML
timeout 130 "$PYTHON" -m translator tune "$out/tune.yaml" --model 125m --device gpu --nproc 1 \
  --steps 4 --timeout 120 --workdir "$out/tune" --json > "$out/tune.json" 2> "$out/tune.log"
code=$?
"$PYTHON" - "$out/tune.json" "$code" <<'PY'
import json, sys
path, code = sys.argv[1], int(sys.argv[2])
try:
    out = json.load(open(path))
except (OSError, ValueError):
    print(f"tune       exit {code}: no result (see tune.log)")
    sys.exit(0)
for p in out["probes"]:
    est, peak = p["estimated_memory_bytes"] or 0, p["peak_memory_bytes"] or 0
    print(f"tune probe micro {p['micro_batch_size']:>3} x {p['gradient_accumulation_steps']:>3}  "
          f"samples/step {p['samples_per_optimizer_step']}  tokens/s "
          f"{p['tokens_per_second'] or 0:,.0f}  peak {peak / 2**30:.2f} GiB  estimate "
          f"{est / 2**30:.2f} GiB" + ("  OOM" if p["out_of_memory"] else ""))
pick = out["pick"] or {}
print(f"tune       exit {code}  pick micro {pick.get('micro_batch_size')} x "
      f"{pick.get('gradient_accumulation_steps')}  {out['probes_used']}/{out['budget']} probes "
      f"in {out['seconds']} s")
PY
[ "$code" -eq 0 ] || status=1
exit $status
