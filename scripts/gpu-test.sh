#!/usr/bin/env bash
# The GPU tests, on a GPU host that has no cargo: run the prebuilt test executable and the
# roofline binary carried in .gpu-bin/ (built here by `scripts/gpu-build.sh`).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
B=.gpu-bin
chmod +x $B/*
export ROOFLINE_BIN=$PWD/$B/roofline
$B/roofline --version || exit 1
$B/gpu_device --test-threads=1 --nocapture
