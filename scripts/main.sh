#!/usr/bin/env bash
# The main job: install what is missing, build, then list every collective DeepSpeed ZeRO-3 issues
# for GPT-2 small on 8 ranks (engine start and two training steps), as the comms logger would log
# it, and the same schedule as a table with its rules.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mkdir -p out
./build/sim/zerosim schedule --ds-config configs/deepspeed/zero3.json --model configs/models/gpt2-small.json \
  --world 8 --steps 2 --format deepspeed --log-summary -o out/zero3-gpt2-w8.log
./build/sim/zerosim schedule --ds-config configs/deepspeed/zero3.json --model configs/models/gpt2-small.json \
  --world 8 --steps 2 --format table -o out/zero3-gpt2-w8.txt
./build/sim/zerosim schedule --ds-config configs/deepspeed/zero3.json --model configs/models/gpt2-small.json \
  --world 8 --steps 2 --format json -o out/zero3-gpt2-w8.json
tail -n 4 out/zero3-gpt2-w8.txt
echo "zerosim: wrote out/zero3-gpt2-w8.log (DeepSpeed comms_logger lines), out/zero3-gpt2-w8.txt (table), out/zero3-gpt2-w8.json (schedule IR)"
