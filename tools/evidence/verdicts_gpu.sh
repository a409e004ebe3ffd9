#!/usr/bin/env bash
# Issue 49's GPU checks in one call on one GPU (under 5 minutes):
#
#   OUT=some/dir bash tools/evidence/verdicts_gpu.sh
#
# 1. `envcheck run --quick --crosscheck`: every headline case timed again by do_bench_cudagraph over the suite's
#    own sets of buffers and matmul tile; prints each row's ratio and bar and one line: whether every row has a
#    ratio within its bar.
# 2. `envcheck burn --minutes 2`: prints each GPU's GEMM rate against its SKU's healthy reference, with the margin
#    (or that the SKU has none).
# Writes to $OUT: both reports' JSON and verdicts_gpu.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/evidence/env.sh
log="$out/verdicts_gpu.log"

say "machine"
{ nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
  "$py" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee -a "$log"

say "envcheck run --quick --crosscheck"
t0=$SECONDS
timeout -s TERM 170 "$py" -m envcheck run --quick --crosscheck --out-dir "$out" --format json 2>&1 | tail -40 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}; wall time: $((SECONDS - t0)) s" | tee -a "$log"
run=$(ls -t "$out"/*.json 2>/dev/null | grep -v _burn | head -1)
"$py" - "$run" <<'EOF' 2>&1 | tee -a "$log"
import sys
from envcheck import model
from envcheck.analysis import analyse

cross = analyse(model.load(sys.argv[1])).crosscheck
rows = [r for r in cross.rows if r.kind == "kernel"] if cross else []
for r in rows:
    shape = "x".join(map(str, r.shape))
    said = f"{r.ratio:.3f} (bar {100 * r.bar:g}%) {r.status}" if r.ratio is not None else f"no ratio: {r.reason} {r.detail or ''}"
    print(f"{r.op} {r.impl} {r.precision} {shape}: ours {r.ours} us, theirs {r.theirs} us: {said}; "
          f"{dict(r.counterpart.settings)}")
ok = bool(rows) and all(r.ratio is not None and r.status == "within" for r in rows)
print(f"crosscheck: {len(rows)} rows, {sum(r.ratio is not None for r in rows)} with a ratio, "
      f"{sum(r.status == 'within' for r in rows)} within their bar: {'EVERY ROW HAS A RATIO WITHIN ITS BAR' if ok else 'NOT ALL'}")
EOF

say "envcheck burn --minutes 2"
t0=$SECONDS
timeout -s TERM 170 "$py" -m envcheck burn --minutes 2 --out-dir "$out" --format json 2>&1 | tail -30 | tee -a "$log"
echo "exit status: ${PIPESTATUS[0]}; wall time: $((SECONDS - t0)) s" | tee -a "$log"
burn=$(ls -t "$out"/*_burn.json 2>/dev/null | head -1)
"$py" - "$burn" <<'EOF' 2>&1 | tee -a "$log"
import sys
from envcheck import model
from envcheck.analysis import analyse

a = analyse(model.load(sys.argv[1])).burn
for g in a.gpus:
    m = next((x for x in g.margins if x.rule == "reference_margin"), None)
    name = g.gpu.device.name if g.gpu.device else "?"
    if g.reference is None:
        print(f"GPU {g.gpu.index} ({name}): no SKU reference; GEMM median {g.rate('gemm')} TFLOP/s")
        continue
    print(f"GPU {g.gpu.index} ({name}): GEMM median {g.rate('gemm'):.1f} TFLOP/s against the {g.reference.sku} "
          f"reference {g.reference.tflops:g} ({g.reference.dtype}, {g.reference.shape}): {m.value:+.2f}% below, "
          f"limit {m.limit:g}%, room {m.room:.2f} points; status {g.status}")
print(f"burn verdict: {a.verdict}")
EOF
gzip -f "$log"
