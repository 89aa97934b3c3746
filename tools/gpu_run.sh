#!/usr/bin/env bash
# One command on a GPU machine, within 10 minutes (docs/gpu.md): the harness at full size with both precisions,
# profiles and peak memory, the independent conv timing, and what the traces hold, packed into at most 8 files
# under $OUT. The machine's own Python, JAX and Flax run it; where TensorFlow is absent the run says so.
# Try it on a CPU first: DEVICE=cpu EXTRA=--quick PY=/path/to/python OUT=/tmp/out bash tools/gpu_run.sh
set -u
DEVICE=${DEVICE:-gpu}
EXTRA=${EXTRA:-}
PY=${PY:-python3}
: "${OUT:?set OUT to the folder for its files}"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
work=$(mktemp -d)
{
  date -u
  nvidia-smi 2>&1 | head -15
  $PY -c "import jax, flax, optax, numpy; print('jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, 'numpy', numpy.__version__); print(jax.devices())"
  nproc
} >"$OUT/env.txt" 2>&1
# $EXTRA is a list of flags on purpose
# shellcheck disable=SC2086
timeout 330 $PY -m parity.run --device "$DEVICE" --precision default --profile --timeout 240 --out "$work/default" $EXTRA \
  >"$OUT/default.log" 2>&1
echo "default: exit $?" >>"$OUT/env.txt"
# shellcheck disable=SC2086
timeout 150 $PY -m parity.run --device "$DEVICE" --precision highest --timeout 120 --out "$work/highest" $EXTRA \
  >"$OUT/highest.log" 2>&1
echo "highest: exit $?" >>"$OUT/env.txt"
timeout 60 $PY benchmarks/conv_independent.py --frameworks jax --calls 21 --results "$work/default/results.json" \
  --json "$work/conv-independent.json" >>"$OUT/env.txt" 2>&1
timeout 60 $PY -W ignore benchmarks/trace_planes.py "$work/default/profiles" >"$OUT/trace-planes.txt" 2>&1
tar czf "$OUT/results.tgz" -C "$work" --exclude profiles default highest conv-independent.json 2>>"$OUT/env.txt"
tar czf "$OUT/profiles.tgz" -C "$work/default" profiles 2>>"$OUT/env.txt"
[ "$(stat -c %s "$OUT/profiles.tgz")" -le 16000000 ] || rm -f "$OUT/profiles.tgz"
ls -la "$OUT" >>"$OUT/env.txt"
