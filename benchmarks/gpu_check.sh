#!/usr/bin/env bash
# The GPU check in one call of the device tool: a machine with an NVIDIA GPU, Python 3.12, JAX and PyTorch with CUDA,
# no network and no Taichi. Taichi travels as a wheel:
#
#   here:   bash benchmarks/gpu_check.sh --fetch      # taichi 1.7.4 (cp312) and dill into .whl/ (git-ignored), ~56 MB
#   there:  bash benchmarks/gpu_check.sh              # device run with carry [".whl"], timeout_s 600
#
# It runs the engine, launch, mass-spring, cart-pole and checkpointing tests on arch=cuda (float64), then
# benchmarks/peers.py --arch cuda (Warp does not travel: its rows say 'not installed'), and leaves the test log and
# peers.md in $OUT (or out/ when OUT is unset).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fetch" ]; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl taichi==1.7.4 dill==0.4.1 && ls -l .whl
    exit
fi
out="${OUT:-out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu_check: no wheels in .whl/ (run 'bash benchmarks/gpu_check.sh --fetch' first)"; exit 2; }
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 MPLBACKEND=Agg TI_SKIP_VERSION_CHECK=ON \
    TI_OFFLINE_CACHE_FILE_PATH=/tmp/taichi-cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
TISIM_TEST_ARCH=cuda timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_launch.py tests/test_engine.py \
    tests/test_mass_spring.py tests/test_cartpole.py tests/test_checkpointing.py 2>&1 | tee "$out/gpu_tests.log" | tail -15
timeout 300 python3 benchmarks/peers.py --arch cuda --repeats 10 --budget 2 --out "$out" 2>&1 | tail -60
