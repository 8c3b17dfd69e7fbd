"""A log-marked model server whose VRAM is held by a child process (as vLLM's
engine core or Ollama's runner hold it): the parent writes a log line and at
once tells the child to act, as a server does. The child loads a PyTorch
model (about 600 MiB of Linear layers) on the GPU, serves a forward pass,
and unloads it with .to("cpu"), del and empty_cache(). Each log line starts
with its wall time, for check.py. Usage: server.py LOG CYCLES"""

import multiprocessing as mp
import sys
import time


def child(conn):
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    model = None
    conn.send("ready")
    while True:
        cmd = conn.recv()
        if cmd == "load":
            model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(9)]).cuda()
            torch.cuda.synchronize()
        elif cmd == "forward":
            with torch.no_grad():
                model(torch.randn(64, 4096, device="cuda"))
            torch.cuda.synchronize()
        elif cmd == "unload":
            model.to("cpu")
            del model
            model = None
            torch.cuda.empty_cache()
            torch.cuda.synchronize()
        elif cmd == "exit":
            conn.send("bye")
            return
        conn.send("ok")


def main():
    log_path, cycles = sys.argv[1], int(sys.argv[2])
    mp.set_start_method("spawn")
    parent, conn = mp.Pipe()
    proc = mp.Process(target=child, args=(conn,))
    proc.start()
    parent.recv()
    log = open(log_path, "a", buffering=1)
    time.sleep(2.0)  # memrel attaches meanwhile (the script waits for the log)

    def step(line, cmd):
        log.write("%.6f %s\n" % (time.time(), line))
        parent.send(cmd)
        parent.recv()
        time.sleep(0.8)

    for _ in range(cycles):
        step("loading model", "load")
        step("serving requests", "forward")
        step("unloading model", "unload")
        log.write("%.6f idle\n" % time.time())
        time.sleep(0.8)
    log.write("%.6f shutting down\n" % time.time())
    time.sleep(0.3)
    parent.send("exit")
    parent.recv()
    proc.join()
    time.sleep(0.5)


if __name__ == "__main__":
    main()
