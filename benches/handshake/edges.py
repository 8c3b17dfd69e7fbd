"""Times memrel's phase-edge handshake from inside a measured program: N
begin/end pairs with the handshake (each call returns once memrel has read
the edge), then N without it (the module told to stop waiting), under
`memrel exec`. Writes the median and 99th percentile of one edge call to
the file named second (memrel exec does not show a program's stdout).
Usage: edges.py N REPORT"""

import statistics
import sys
import time

import memrel

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500


def edges():
    out = []
    for _ in range(N):
        t = time.perf_counter()
        memrel.begin("busy")
        out.append(time.perf_counter() - t)
        t = time.perf_counter()
        memrel.end("busy")
        out.append(time.perf_counter() - t)
    return out


REPORT = open(sys.argv[2], "a") if len(sys.argv) > 2 else sys.stdout


def line(name, xs):
    xs = sorted(xs)
    p99 = xs[int(0.99 * (len(xs) - 1))]
    REPORT.write("%-18s %5d edges  median %7.1f us  p99 %7.1f us  max %7.1f us"
          % (name, len(xs), statistics.median(xs) * 1e6, p99 * 1e6, xs[-1] * 1e6) + "\n")


with_ack = edges()
memrel._channel.ack = None  # the module stops waiting (as after a timeout)
without = edges()
line("with handshake", with_ack)
line("without", without)
