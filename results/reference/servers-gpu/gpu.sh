#!/usr/bin/env bash
# Issue 37 line 5 on the GPU machine, one device call from the repository root:
#   bash results/reference/servers-gpu/gpu.sh
# `memrel drive --device cuda` of the test servers in tests/fixtures/servers/
# holding a real PyTorch model on the GPU in a child process (as vLLM's engine
# core and Ollama's runner do): the vLLM-shaped one at sleep level 1 and level
# 2, the same at level 1 with a sleep that answers before its memory is freed
# (--late-free-s 0.5), with the default 2 s settle window and with --settle 5,
# and the Ollama-shaped one (a runner process per model).
# nvidia-smi's per-process list is polled every 50 ms beside each; check.py
# holds every request's settled VRAM against nvidia-smi's sum over the
# server's processes while it was settled (<name>.check.txt).
# Needs .gpu/memrel.xz (the default CPU build: NVML is loaded at run time);
# writes $OUT/servers.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/results; rm -rf "$R"; mkdir -p "$R"
HERE=results/reference/servers-gpu
S=tests/fixtures/servers
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memrel.xz /tmp/memrel && chmod +x /tmp/memrel || exit 1
M=/tmp/memrel
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; uname -a; nproc; python3 -c "import torch; print('torch', torch.__version__)"; } > "$R/device.txt" 2>&1
poll() { nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader,nounits -lms 50 > "$1" 2>&1 & echo $!; }

drive() { # name port memrel-args... -- server-args...
  local name=$1 port=$2; shift 2
  local SMI; SMI=$(poll "$R/$name.smi.csv")
  python3 -c 'import time; print("%.6f" % time.time())' > "$R/$name.t0"
  $M drive --device cuda --url "http://127.0.0.1:$port" --cycles 3 --dir "$R/$name" "$@" \
    > "$R/$name.stdout" 2> "$R/$name.stderr"
  echo "$name rc=$?" >> "$R/steps.log"
  sleep 0.3; kill "$SMI"
  python3 $HERE/check.py "$R/$name" "$R/$name.t0" "$R/$name.smi.csv" > "$R/$name.check.txt" 2>&1
}

drive vllm-level1 18001 --server vllm --sleep-level 1 -- python3 $S/vllm_like.py --device cuda --port 18001 --weights-mib 2048 --kv-mib 1024
drive vllm-level2 18002 --server vllm --sleep-level 2 -- python3 $S/vllm_like.py --device cuda --port 18002 --weights-mib 2048 --kv-mib 1024
drive vllm-late-free 18003 --server vllm --sleep-level 1 -- python3 $S/vllm_like.py --device cuda --port 18003 --weights-mib 2048 --kv-mib 1024 --late-free-s 0.5
drive vllm-late-free-settle5 18005 --server vllm --sleep-level 1 --settle 5 -- python3 $S/vllm_like.py --device cuda --port 18005 --weights-mib 2048 --kv-mib 1024 --late-free-s 0.5
drive ollama 18004 --server ollama --model tiny -- python3 $S/ollama_like.py --device cuda --port 18004 --model-mib 1024
cat "$R/steps.log" "$R"/*.check.txt
tail -n 3 "$R"/*.stderr
tar -C /tmp -czf "$OUT/servers.tar.gz" results
