#!/usr/bin/env bash
# Quick start: install what is missing, build vtrainctl (and only what it needs:
# no tests, no server), and predict GPT-3 175B on 512 A100s as the vTrain paper ran it
# (--settings paper) with the built-in default profiles.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_TARGETS=vtrainctl scripts/build.sh
exec build/client/vtrainctl predict --local --model gpt3-175b --settings paper --gpu a100-sxm4-80gb \
  --gpus 512 --tp 8 --pp 16 --micro-batch 6 --global-batch 1536 \
  --tokens 300e9 --price-usd-per-gpu-hour 4.096 "$@"
