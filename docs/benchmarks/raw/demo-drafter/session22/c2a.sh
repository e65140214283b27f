#!/usr/bin/env bash
# issue-8 call 2a: part b of the demo GGUF (after c1.sh), then the demo model built (setup.sh)
set -u; mkdir -p /root/parts && cp .gpu2/p.ab /root/parts/ && source .gpu/setup.sh
