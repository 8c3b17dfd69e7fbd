"""A program whose GPU memory is held by a child process, as a launcher's or
a server's is (torchrun, vLLM's engine process): under `memrel exec --tree
--device cuda` its VRAM is the tree's. The parent marks the phases; the
child (benches/nvml/bare_nvml.py --hold) makes a CUDA context and holds it.

  memrel exec --tree --device cuda -- python3 benches/nvml/tree_child.py
"""

import os
import subprocess
import sys
import time

import memrel

here = os.path.dirname(os.path.abspath(__file__))
with memrel.phase("load", model="child"):
    child = subprocess.Popen([sys.executable, os.path.join(here, "bare_nvml.py"), "--hold", "3"])
    time.sleep(2)
with memrel.phase("unload", model="child"):
    child.wait()
memrel.release()
time.sleep(0.5)
