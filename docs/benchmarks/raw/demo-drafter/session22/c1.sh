#!/usr/bin/env bash
# next session's issue-8 call 1: part a of the demo GGUF and session 21's self-written problems
# (.gpu1/si21.jsonl.gz, 25,195 problems) onto the machine; call 2 brings part b
set -u; mkdir -p /root/parts && cp .gpu1/p.aa .gpu1/si21.jsonl.gz /root/parts/ && ls -la /root/parts
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
