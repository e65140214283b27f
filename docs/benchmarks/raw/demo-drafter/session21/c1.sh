#!/usr/bin/env bash
# session 21 call 1: part a of the demo GGUF onto the machine (the next call brings part b)
set -u; mkdir -p /root/parts && cp .gpu1/p.aa /root/parts/ && ls -la /root/parts
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
