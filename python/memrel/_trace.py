"""Where the live bytes were allocated: memrel's ``--trace-allocations``.

Imported by the memrel module only when memrel asks for it (it names a file
in ``MEMREL_TRACE_ALLOCATIONS``), so a program measured without the flag
never starts tracemalloc. Standard library only.

At the begin of the first measured load (cycle 1's first ``load``) it starts
``tracemalloc`` with one frame (the allocating line: the cheapest setting,
and the only frame the ``lineno`` grouping reads) and takes a snapshot. At
the end of every ``unload`` and ``release`` of a cycle (after the edge is
sent and read, so the edge's reading is the program's own) it takes another
and compares it with the first: the sites whose size grew since the load
began are what still holds memory. The 20 largest go to the file, one row
each: ``cycle, edge, file, line, bytes, count``, with the net growth of
everything traced (``traced_bytes``) and what tracemalloc itself holds
(``tracemalloc_bytes``). A later snapshot at the same edge of the same cycle
(a second model's unload) replaces the earlier one: the rows say what was
held when the cycle's last unload (or release) ended, as ``after_unload``
(and ``after_release``) do. The file is rewritten whole at each snapshot
(a temporary file renamed over it), so memrel never reads half of it.

Cycles are numbered as memrel numbers a program's edges (a ``load`` begin
opens the next cycle when none is open or the current one has had an
unload, release or settle).

What it cannot see: memory allocated before the first load's begin, and
memory that does not pass through Python's allocator or report to
tracemalloc (a torch tensor's storage, a C extension's own malloc, device
memory). numpy's array data reports to it.
"""

import csv
import itertools
import operator
import os
import sys
import threading
import tracemalloc

#: Frames kept per allocation: the allocating line only.
FRAMES = 1
#: Sites written per snapshot.
TOP = 20
COLUMNS = (
    "cycle",
    "edge",
    "file",
    "line",
    "bytes",
    "count",
    "traced_bytes",
    "tracemalloc_bytes",
)
# Edges after which what is still held is written.
_SNAPSHOT_AT = ("unload", "release")
# Edges that close a cycle (the next load begin opens another).
_CLOSING = ("unload", "release", "settle")
# Files whose allocations are memrel's or tracemalloc's, not the program's.
_OWN = (os.path.dirname(os.path.abspath(__file__)) + os.sep, tracemalloc.__file__)


def _by_line():
    """{(file, line): (bytes, blocks)} of every block traced now, memrel's
    own and tracemalloc's left out.

    The traces are grouped by their (interned) traceback after a sort, the
    bytes summed in C: ``Snapshot.compare_to`` does the same in Python,
    allocating an int per trace while tracemalloc traces each allocation,
    and took 18 s for 2 million live blocks where this took 0.5 s (plus
    the 2 s of reading the traces, which both pay)."""
    get_traces = getattr(tracemalloc, "_get_traces", None)
    if get_traces is None:  # not CPython's tracemalloc: the public, slow way
        stats = tracemalloc.take_snapshot().statistics("lineno")
        return {
            (s.traceback[0].filename, s.traceback[0].lineno): (s.size, s.count)
            for s in stats
            if not s.traceback[0].filename.startswith(_OWN)
        }
    traces = get_traces()
    traces.sort(key=_TRACEBACK)
    out = {}
    for traceback, group in itertools.groupby(traces, key=_TRACEBACK):
        site = tuple(traceback[0]) if traceback else ("<unknown>", 0)
        if site[0].startswith(_OWN):
            continue
        group = list(group)
        size, count = out.get(site, (0, 0))
        out[site] = (size + sum(map(_SIZE, group)), count + len(group))
    return out


# A raw trace is (domain, size, traceback, frames): traceback's first frame
# is the allocating line, as (filename, lineno).
_SIZE = operator.itemgetter(1)
_TRACEBACK = operator.itemgetter(2)


class Tracer(object):
    """The tracing of one measured process, writing to ``path``."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.owner = os.getpid()
        self.cycle = 0
        self.closing = False
        self.begin_snapshot = None
        self.groups = {}  # (cycle, edge) -> rows, in the order first written
        self.order = []
        self.failed = False
        # Written now, with no rows: memrel tells "imported, nothing held"
        # from "never imported" (no file).
        self._write()

    def at_begin(self, phase):
        """Before the begin edge of ``phase`` is sent."""
        if os.getpid() != self.owner:
            return
        with self.lock:
            if phase == "load" and (self.cycle == 0 or self.closing):
                self.cycle += 1
                self.closing = False
                if self.begin_snapshot is None:
                    self._start()
            elif phase in _CLOSING:
                self.closing = True

    def at_end(self, phase):
        """After the end edge of ``phase`` was sent (and read)."""
        if os.getpid() != self.owner or self.failed:
            return
        with self.lock:
            if phase in _CLOSING:
                self.closing = True
            if phase in _SNAPSHOT_AT and self.begin_snapshot is not None:
                try:
                    self._held(phase)
                except Exception as e:
                    # Never the program's failure: said once, tracing stops.
                    self.failed = True
                    tracemalloc.stop()
                    sys.stderr.write(
                        "memrel: --trace-allocations stopped: cannot write %s: %s\n"
                        % (self.path, e)
                    )

    def _start(self):
        if not tracemalloc.is_tracing():
            tracemalloc.start(FRAMES)
        self.begin_snapshot = _by_line()

    def _held(self, edge):
        overhead = tracemalloc.get_tracemalloc_memory()
        now = _by_line()
        begin = self.begin_snapshot
        grew = []
        traced = 0
        for site in set(now) | set(begin):
            size, count = now.get(site, (0, 0))
            size_before, count_before = begin.get(site, (0, 0))
            traced += size - size_before
            if size > size_before:
                grew.append((size - size_before, max(count - count_before, 0), site))
        grew.sort(reverse=True)
        rows = [
            (self.cycle, edge, filename, lineno, size, count, traced, overhead)
            for size, count, (filename, lineno) in grew[:TOP]
        ]
        key = (self.cycle, edge)
        if key not in self.groups:
            self.order.append(key)
        self.groups[key] = rows
        self._write()

    def _write(self):
        tmp = "%s.%d.tmp" % (self.path, os.getpid())
        with open(tmp, "w", newline="") as f:
            out = csv.writer(f, lineterminator="\n")
            out.writerow(COLUMNS)
            for key in self.order:
                out.writerows(self.groups[key])
        os.replace(tmp, self.path)
