"""A server-like PyTorch program for `memrel attach` (issue 25): it loads a
model, answers "requests" (one forward pass each, a few per second), and
every `--sleep-every` requests puts the model to sleep for `--asleep` seconds
the way servers do (weights to page-locked host buffers, device memory freed
with empty_cache), then wakes it and goes on; at the end it unloads. It knows
nothing of memrel: it only writes a log, which `memrel attach --log` follows.

  python3 server.py --model DIR --log server.log &
  memrel attach --device cuda --log server.log \\
      --mark-on 'loading model=load' --mark-on 'ready=end' \\
      --mark-on 'going to sleep=sleep' --mark-on 'asleep=asleep' \\
      --mark-on 'waking=wake' --mark-on 'awake=end' \\
      --mark-on 'unloading=unload' --mark-on 'unloaded=end' $!
"""

import argparse
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a HuggingFace-layout directory (memrel model gen qwen2-small DIR)")
    ap.add_argument("--log", required=True, help="the log file to write")
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--sleep-every", type=int, default=10)
    ap.add_argument("--asleep", type=float, default=2.0, help="seconds asleep each time")
    ap.add_argument("--start-delay", type=float, default=3.0, help="seconds before the load (time to attach)")
    args = ap.parse_args()
    log = open(args.log, "a", buffering=1)

    def say(text):
        log.write("%.3f %s\n" % (time.time(), text))

    say("started pid %d" % os.getpid())
    import torch
    import transformers

    os.environ["HF_HUB_OFFLINE"] = "1"
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    time.sleep(args.start_delay)

    say("loading model %s" % args.model)
    model = transformers.AutoModel.from_pretrained(args.model).to(dev).eval()
    torch.cuda.synchronize()
    say("ready")
    ids = torch.randint(0, model.config.vocab_size, (1, 32), device=dev)
    pinned = None
    for i in range(1, args.requests + 1):
        with torch.no_grad():
            model(input_ids=ids).last_hidden_state[0, 0, 0].item()
        say("request %d done" % i)
        time.sleep(0.1)
        if i % args.sleep_every == 0 and i < args.requests:
            say("going to sleep")
            pinned = []
            with torch.no_grad():
                for t in list(model.parameters()) + list(model.buffers()):
                    buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                    buf.copy_(t.data, non_blocking=True)
                    pinned.append(buf)
                    t.data = buf
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            say("asleep")
            time.sleep(args.asleep)
            say("waking")
            with torch.no_grad():
                for t in list(model.parameters()) + list(model.buffers()):
                    t.data = t.data.to(dev, non_blocking=True)
            torch.cuda.synchronize()
            pinned = None
            say("awake")
    say("unloading")
    del model, ids, pinned
    torch.cuda.empty_cache()
    say("unloaded")
    time.sleep(1.0)
    say("exiting")
    return 0


if __name__ == "__main__":
    sys.exit(main())
