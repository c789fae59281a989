#!/usr/bin/env bash
# Run HERE (with network), once, before the window: the wheels scripts/device_window.sh installs on
# the accelerator machine, which has no network. Pure-Python or manylinux x86-64 wheels for CPython
# 3.12, no deps: each one needed is named. About 3 MiB in all; the folder ignores itself
# (.whl/.gitignore) and travels with the device call's `carry: [".whl"]`.
#
# Every dependency of pyproject.toml is in exactly one of the three lists below, and each pin in
# WHEELS is inside pyproject's range (tests/bench/test_device_check.py checks both): change a pin there,
# change it here. The machine's own jax is newer than pyproject's pin; the window uses it as it is.
#   WHEELS:     carried, with what they need that the machine lacks (array-record, portpicker)
#   ON_MACHINE: in the machine's image already (the device tool's package list)
#   NOT_NEEDED: not used by the window (tensorflow-datasets only prepares IMDB and CIFAR-10;
#               importlib_resources is not imported by the window's code)
WHEELS="grain==0.2.18 array-record==0.8.6 portpicker==1.6.0 tensorboardX==2.6.5"
ON_MACHINE="jax flax optax orbax-checkpoint numpy tqdm psutil matplotlib pillow"
NOT_NEEDED="tensorflow-datasets importlib_resources"
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl && echo '*' > .whl/.gitignore
# shellcheck disable=SC2086  # the lists split on spaces
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl $WHEELS
ls -l .whl
echo "not carried: $ON_MACHINE (on the machine); $NOT_NEEDED (not needed)"
