#!/usr/bin/env bash
# The accelerator window as ONE command for the device tool, run in the repository root there:
#
#     bash scripts/device_window.sh            (carry: [".whl"], timeout_s: 600)
#
# Set-up (about 10 s): the wheels of scripts/device_wheels.sh, if carried, go to /tmp/site; the
# project is used from this checkout through PYTHONPATH (the machine's jax is newer than
# pyproject's pin, so no `pip install -e .`, which would try to replace it offline). A preflight
# imports everything the check needs and fails within PREFLIGHT_S (60) seconds. Then
# `python -m lra.bench.device_check` gets what is left of WINDOW_S (585 s; the device tool allows
# 600 per command) less 10 s for the last copy as its --total (extra arguments are passed on and
# win over these). A persistent compilation cache ($WORK/jax-cache) lets the ListOps runs reuse
# what the probe compiled. Back in $OUT (the device tool returns at most 8 files): preflight.txt,
# device_window.log, results.tar.gz (the whole results folder, rewritten after every finished
# cell) and the summary device-check.jsonl. Unpack with `tar xzf results.tar.gz`.
# docs/accelerators.md ("The accelerator window") says what the window does, minute by minute.
set -uo pipefail
start=$(date +%s)
OUT=${OUT:-$PWD/device-out}
WORK=${LRA_WINDOW_DIR:-/tmp/lra-window}
PY=${PYTHON:-python3}
WINDOW_S=${WINDOW_S:-585}
PREFLIGHT_S=${PREFLIGHT_S:-60}
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$WORK/jax-cache}
if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 3
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    echo "cpus: $(nproc)"
    timeout "$PREFLIGHT_S" "$PY" - <<'PYEOF'
import jax, flax, optax, orbax.checkpoint, grain, tensorboardX, tqdm, psutil  # noqa: F401
import lra.bench.device_check, lra.bench.steps, lra.run  # noqa: F401
print("jax", jax.__version__, "flax", flax.__version__, jax.devices())
PYEOF
} > "$OUT/preflight.txt" 2>&1
preflight=$?
cat "$OUT/preflight.txt"
if [ $preflight -ne 0 ]; then
    echo "preflight failed (exit $preflight; 124: over ${PREFLIGHT_S} s): see preflight.txt"
    exit 3
fi
setup=$(( $(date +%s) - start ))
total=$(( WINDOW_S - setup - 10 ))
echo "set-up: $setup s; the check gets $total s"
"$PY" -m lra.bench.device_check --results-dir "$WORK/results" --bundle "$OUT/results.tar.gz" \
    --data-dir "$WORK/data" --workdir "$WORK/work" --total "$total" "$@" 2>&1 \
    | tee "$OUT/device_window.log"
code=${PIPESTATUS[0]}
cp "$WORK"/results/efficiency/device-check__*.jsonl "$OUT/device-check.jsonl" 2>/dev/null
echo "device_window: exit $code after $(( $(date +%s) - start )) s"
exit "$code"
