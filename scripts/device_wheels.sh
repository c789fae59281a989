#!/usr/bin/env bash
# Run HERE (with network), once, before the window: the wheels scripts/device_window.sh installs on
# the accelerator machine, which has jax, flax, optax, orbax-checkpoint, numpy, tqdm and psutil but
# not these (and no network). Pure-Python or manylinux x86-64 wheels for CPython 3.12, no deps
# (each needed one is named). About 3 MiB in all; the folder ignores itself (.whl/.gitignore) and
# travels with the device call's `carry: [".whl"]`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl && echo '*' > .whl/.gitignore
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    grain==0.2.18 array-record==0.8.6 portpicker==1.6.0 tensorboardX==2.6.5
ls -l .whl
