"""memrel's side of a measured program: mark phases, run the strategy's release.

memrel starts a program as its child (``memrel exec -- CMD`` or a scenario
with ``command = [...]``), samples its RSS and VRAM from outside, and learns
where the program is from one-line JSON messages on a private pipe whose write
end it hands over as the file descriptor named in ``MEMREL_EVENT_FD``::

    import memrel                       # sends hello, runs the start actions
    memrel.baseline(0.5)
    with memrel.phase("load", model="bert"):
        model = AutoModel.from_pretrained(memrel.models()["bert"])
    with memrel.phase("unload", model="bert"):
        del model
    memrel.release()                    # gc, malloc_trim, empty_cache, ...
    memrel.settle(0.3)

Run without memrel (``MEMREL_EVENT_FD`` unset) every function still works and
writes nothing, so the same program runs bare.

Protocol v1: each message is ``{"v":1,"type":T,"data":{...}}`` plus "\\n",
under 4096 bytes, written with one ``os.write`` (atomic on a pipe). Types:
``hello`` (at import), ``phase`` (begin/end edges), ``done`` (at a normal
exit, from atexit) and ``error`` (an uncaught exception). Nothing else is
written on the descriptor.

The handshake: after each ``phase`` line the module waits (at most 10 s) for
one byte on the descriptor named in ``MEMREL_ACK_FD``, which memrel writes
once it has read every resource at that edge; so what the program does right
after ``begin``/``end`` returns cannot leak into the edge's reading.

Standard library only. torch and jax are used only when the program has
imported them (``sys.modules``); this module never imports them, never
initialises CUDA and never starts JAX's backends (the edge's ``views``).
onnxruntime is imported only by ``ort_session()`` and ``ort_run_options()``,
which a program using it calls.
"""

import atexit
import ctypes
import gc
import json
import os
import sys
import threading
import time

__all__ = [
    "PHASES",
    "START_ACTIONS",
    "RELEASE_ACTIONS",
    "phase",
    "begin",
    "end",
    "release",
    "baseline",
    "settle",
    "cycles",
    "models",
    "device",
    "strategy",
    "takes_objects",
    "ort_session",
    "ort_run_options",
]

PROTOCOL_VERSION = 1
PHASES = (
    "warmup",
    "baseline",
    "load",
    "forward",
    "unload",
    "release",
    "settle",
    "idle",
    "busy",
    "sleep",
    "asleep",
    "wake",
)
START_ACTIONS = (
    "mallopt_mmap_threshold",
    "setenv_trim_threshold",
    "ort_arena",
    "ort_no_arena",
    "ort_shrink",
    "ort_same_as_requested",
    "xla_env",
)
# RELEASE_ACTIONS, the release steps in order, is made from the _ACTIONS table
# below (one list; memrel's test ties it and START_ACTIONS to its own table).
# Release actions that work on the objects passed to release().
_OBJECT_ACTIONS = ("to_cpu", "detach")

_MAX_LINE = 4095  # bytes with the newline: a pipe write up to PIPE_BUF is atomic
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
_MIB = 1024.0 * 1024.0


# ---------------------------------------------------------------- formatting


def _fmt_bytes(n):
    n = float(n)
    if abs(n) < 1024:
        return "%d B" % n
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024.0
        if abs(n) < 1024 or unit == "GiB":
            return "%.2f %s" % (n, unit) if unit == "GiB" else "%.1f %s" % (n, unit)
    return "%.2f GiB" % n


def _fmt_ms(seconds):
    return "%.1f ms" % (seconds * 1000.0) if seconds < 10 else "%.2f s" % seconds


def _first_line(exc):
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return "%s: %s" % (type(exc).__name__, line) if line else type(exc).__name__


# ---------------------------------------------------------------- the channel


class _Channel(object):
    """The write end of memrel's pipe, or nothing when run bare."""

    def __init__(self):
        self.fd = None
        self.ack = None
        self.lock = threading.Lock()
        self.owner = os.getpid()
        ack_raw = os.environ.pop("MEMREL_ACK_FD", None)
        ack_pipe = os.environ.pop("MEMREL_ACK_PIPE", None)
        raw = os.environ.pop("MEMREL_EVENT_FD", None)
        # Popped: a child process started from here must not take an unrelated
        # descriptor with the same number for memrel's channel.
        if raw is None or raw.strip() == "":
            return
        try:
            fd = int(raw)
        except ValueError:
            self._warn("MEMREL_EVENT_FD=%r is not a descriptor number" % raw)
            return
        pipe = os.environ.pop("MEMREL_EVENT_PIPE", None)
        if pipe and not self._is_pipe(fd, pipe):
            # A launcher (torchrun, accelerate launch) closed the descriptor
            # before starting this process: rank 0 finds the pipe again in
            # an ancestor, the other ranks report nothing.
            fd = self._reopen(fd, pipe) if os.environ.get("RANK", "0") == "0" else None
            if fd is None:
                return
        try:
            os.fstat(fd)
        except OSError as e:
            self._warn("MEMREL_EVENT_FD=%d is not open (%s)" % (fd, e.strerror))
            return
        try:
            os.set_inheritable(fd, False)
        except OSError:
            pass
        self.fd = fd
        self.ack = self._open_ack(ack_raw, ack_pipe)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    @classmethod
    def _open_ack(cls, raw, pipe):
        """The acknowledgements' descriptor, or None (an older memrel, or
        a launcher that closed it and no ancestor holds it)."""
        try:
            fd = int(raw)
        except (TypeError, ValueError):
            return None
        if pipe and not cls._is_pipe(fd, pipe):
            if os.environ.get("RANK", "0") != "0":
                return None
            fd = cls._reopen(fd, pipe, os.O_RDONLY)
            if fd is None:
                return None
        try:
            os.fstat(fd)
            os.set_inheritable(fd, False)
        except OSError:
            return None
        return fd

    @staticmethod
    def _is_pipe(fd, pipe):
        try:
            return os.readlink("/proc/self/fd/%d" % fd) == pipe
        except OSError:
            return False

    @staticmethod
    def _reopen(fd, pipe, flags=os.O_WRONLY):
        """The pipe ``pipe`` (``pipe:[INODE]``) as a new descriptor, opened
        through the first ancestor that holds it as ``fd``; None if none does."""
        pid = os.getppid()
        for _ in range(16):
            if pid <= 1:
                break
            path = "/proc/%d/fd/%d" % (pid, fd)
            try:
                if os.readlink(path) == pipe:
                    return os.open(path, flags)
            except OSError:
                pass
            try:
                with open("/proc/%d/stat" % pid) as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                break
        return None

    @staticmethod
    def _warn(text):
        try:
            sys.stderr.write("memrel: %s; phases are not reported\n" % text)
        except Exception:
            pass

    def _after_fork(self):
        # A forked child (a DataLoader worker, say) is not the measured
        # process: it must neither write phases nor keep the pipe open.
        fd, self.fd = self.fd, None
        ack, self.ack = self.ack, None
        self.lock = threading.Lock()
        for d in (fd, ack):
            if d is not None:
                try:
                    os.close(d)
                except OSError:
                    pass

    def _wait_for_ack(self):
        """Waits until memrel has read the edge just sent (the handshake);
        without an answer in 10 s it stops waiting for later ones."""
        ack = self.ack
        if ack is None:
            return
        import select

        try:
            while True:
                try:
                    ready, _, _ = select.select([ack], [], [], 10.0)
                except InterruptedError:
                    continue
                if ready and os.read(ack, 1):
                    return
                break
        except OSError:
            pass
        self.ack = None

    def send(self, kind, data):
        if self.fd is None or os.getpid() != self.owner:
            return False
        line = _encode(kind, data)
        with self.lock:
            fd = self.fd
            if fd is None:
                return False
            try:
                view = memoryview(line)
                while view:
                    try:
                        n = os.write(fd, view)
                    except BlockingIOError:
                        # A non-blocking pipe that is full: memrel is slow to
                        # drain it; wait for room rather than lose the edge.
                        import select

                        select.select([], [fd], [], 5.0)
                        continue
                    view = view[n:]
                if kind == "phase":
                    self._wait_for_ack()
                return True
            except OSError as e:
                # memrel is gone (EPIPE) or the descriptor broke: stop writing.
                self.fd = None
                self._warn("cannot write to the event channel (%s)" % (e.strerror or e))
                return False


def _truncate(obj, limit):
    if isinstance(obj, str):
        if len(obj) <= limit:
            return obj
        tail = limit // 3  # keep the end too: "...; raised KeyError: ..."
        return obj[: max(limit - tail - 3, 0)] + "..." + obj[len(obj) - tail :]
    if isinstance(obj, dict):
        return dict((k, _truncate(v, limit)) for k, v in obj.items())
    if isinstance(obj, list):
        return [_truncate(v, limit) for v in obj]
    return obj


def _encode(kind, data):
    """One protocol line, shortened to fit a pipe's atomic write if needed."""

    def dump(d):
        text = json.dumps(
            {"v": PROTOCOL_VERSION, "type": kind, "data": d},
            separators=(",", ":"),
            ensure_ascii=True,
            allow_nan=False,
        )
        return (text + "\n").encode("ascii")

    line = dump(data)
    for limit in (1000, 300, 100, 40):
        if len(line) <= _MAX_LINE:
            return line
        line = dump(_truncate(data, limit))
    checks = data.get("checks") if isinstance(data, dict) else None
    if isinstance(checks, list):
        kept = list(_truncate(checks, 40))
        while kept and len(line) > _MAX_LINE:
            kept.pop()
            slim = dict(_truncate(data, 40))
            slim["checks"] = kept + [
                {
                    "name": "memrel.py",
                    "ok": False,
                    "detail": "%d checks left out to fit one line" % (len(checks) - len(kept)),
                }
            ]
            line = dump(slim)
    return line


# ---------------------------------------------------------------- the process


def _status_fields(names):
    try:
        with open("/proc/self/status", "rb") as f:
            text = f.read()
    except OSError:
        return {}
    out = {}
    for line in text.split(b"\n"):
        key, _, value = line.partition(b":")
        key = key.decode("ascii", "replace")
        if key in names:
            try:
                out[key] = int(value.split()[0]) * 1024
            except (IndexError, ValueError):
                pass
    return out


def _memory():
    """RSS split as memrel reads it from outside; None when unreadable."""
    s = _status_fields(("VmRSS", "RssAnon", "RssFile", "RssShmem"))
    if "VmRSS" not in s or "RssAnon" not in s or "RssFile" not in s:
        return None
    return {
        "rss_bytes": s["VmRSS"],
        "anon_bytes": s["RssAnon"],
        "file_bytes": s["RssFile"] + s.get("RssShmem", 0),
    }


def _anon():
    return _status_fields(("RssAnon",)).get("RssAnon")


def _anon_change(before, after):
    if before is None or after is None:
        return ""
    return ", anon %.1f -> %.1f MiB" % (before / _MIB, after / _MIB)


_libc_handle = None


def _libc():
    global _libc_handle
    if _libc_handle is None:
        _libc_handle = ctypes.CDLL(None)
    return _libc_handle


def _is_glibc():
    try:
        return hasattr(_libc(), "gnu_get_libc_version")
    except OSError:
        return False


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


_glibc_malloc = None  # mallinfo2, where glibc's malloc serves this process


def _glibc_mallinfo2():
    """glibc's mallinfo2 where glibc's own malloc serves the process (not a
    preloaded jemalloc/tcmalloc/mimalloc, whose malloc symbol comes first);
    else None."""
    global _glibc_malloc
    if _glibc_malloc is None:
        _glibc_malloc = False
        try:
            libc = ctypes.CDLL("libc.so.6")
            served = ctypes.cast(_libc().malloc, ctypes.c_void_p).value
            own = ctypes.cast(libc.malloc, ctypes.c_void_p).value
            if served == own and hasattr(libc, "mallinfo2"):
                libc.mallinfo2.restype = _Mallinfo2
                _glibc_malloc = libc.mallinfo2
        except (OSError, AttributeError):
            pass
    return _glibc_malloc or None


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _malloc_library():
    """The library whose ``malloc`` this process calls (``dladdr``), or None."""
    try:
        dladdr = _libc().dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        dladdr.restype = ctypes.c_int
        info = _DlInfo()
        served = ctypes.cast(_libc().malloc, ctypes.c_void_p).value
        if not dladdr(served, ctypes.byref(info)) or not info.dli_fname:
            return None
        return ctypes.CDLL(info.dli_fname.decode("utf-8", "replace"))
    except (OSError, AttributeError):
        return None


def _jemalloc_heap(lib):
    mallctl = lib.mallctl
    mallctl.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    mallctl.restype = ctypes.c_int
    epoch = ctypes.c_uint64(1)
    size = ctypes.c_size_t(8)

    def read(name):
        value = ctypes.c_size_t(0)
        n = ctypes.c_size_t(ctypes.sizeof(value))
        if mallctl(name, ctypes.byref(value), ctypes.byref(n), None, 0) != 0:
            return None
        return value.value

    def heap():
        # Statistics are a snapshot that writing the epoch refreshes.
        mallctl(b"epoch", ctypes.byref(epoch), ctypes.byref(size), ctypes.byref(epoch), 8)
        held = read(b"stats.resident")
        if held is None:
            return None
        return {"in_use_bytes": read(b"stats.allocated"), "held_bytes": held}

    return heap


def _tcmalloc_heap(lib):
    get = lib.MallocExtension_GetNumericProperty
    get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
    get.restype = ctypes.c_int

    def read(name):
        value = ctypes.c_size_t(0)
        return value.value if get(name, ctypes.byref(value)) else None

    def heap():
        size = read(b"generic.heap_size")
        if size is None:
            return None
        unmapped = read(b"tcmalloc.pageheap_unmapped_bytes") or 0
        return {
            "in_use_bytes": read(b"generic.current_allocated_bytes"),
            "held_bytes": max(size - unmapped, 0),
        }

    return heap


def _mimalloc_heap(lib):
    info = lib.mi_process_info
    info.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 8
    info.restype = None

    def heap():
        v = [ctypes.c_size_t(0) for _ in range(8)]
        info(*[ctypes.byref(x) for x in v])
        # Committed bytes; mimalloc counts no bytes in use without its stats.
        return {"in_use_bytes": None, "held_bytes": v[5].value}

    return heap


_preloaded = None  # the heap reader of a jemalloc/tcmalloc/mimalloc serving malloc


def _preloaded_heap():
    """Bytes in use vs held of the jemalloc, tcmalloc or mimalloc that serves
    ``malloc`` (preloaded), read as memrel's worker reads them
    (src/worker/allocator.rs); None where none does."""
    global _preloaded
    if _preloaded is None:
        _preloaded = False
        lib = _malloc_library()
        for symbol, reader in (
            ("mallctl", _jemalloc_heap),
            ("MallocExtension_GetNumericProperty", _tcmalloc_heap),
            ("mi_process_info", _mimalloc_heap),
        ):
            if lib is not None and hasattr(lib, symbol):
                _preloaded = reader(lib)
                break
    if not _preloaded:
        return None
    heap = _preloaded()
    if heap is not None and heap["in_use_bytes"] is None:
        del heap["in_use_bytes"]
    return heap


def _heap_view():
    """The allocator's own view at an edge, as the candle worker sends it:
    glibc's mallinfo2 (`allocator`, where glibc's malloc serves the process)
    and bytes in use vs held (`heap`, glibc's or a preloaded jemalloc's,
    tcmalloc's or mimalloc's); None for what is not there, both None with
    MEMREL_HEAP_VIEW=0. One mallinfo2 call: it walks glibc's free lists."""
    if os.environ.get("MEMREL_HEAP_VIEW") == "0":
        return None, None
    mallinfo2 = _glibc_mallinfo2()
    if mallinfo2 is None:
        return None, _preloaded_heap()
    m = mallinfo2()
    allocator = {
        "arena_bytes": m.arena,
        "mmapped_bytes": m.hblkhd,
        "in_use_bytes": m.uordblks,
        "free_bytes": m.fordblks,
        "top_releasable_bytes": m.keepcost,
    }
    heap = {"in_use_bytes": m.uordblks + m.hblkhd, "held_bytes": m.arena + m.hblkhd}
    return allocator, heap


_said = set()


def _say_once(key, text):
    if key not in _said:
        _said.add(key)
        try:
            sys.stderr.write("memrel: %s\n" % text)
        except Exception:
            pass


_visible = None  # CUDA's visible index -> NVML's, or False: the same numbers


def _visible_devices():
    """CUDA_VISIBLE_DEVICES as NVML indices (None for an entry that cannot be
    mapped), or False where it is unset (CUDA's numbers are NVML's). CUDA
    stops at the first entry it cannot read; so does this."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return False
    out = []
    uuids = None
    for entry in raw.split(","):
        entry = entry.strip()
        if entry.isdigit():
            out.append(int(entry))
        elif entry.startswith("GPU-") or entry.startswith("MIG-"):
            if uuids is None:
                uuids = _nvml_uuids()
            found = [i for i, u in enumerate(uuids) if u.startswith(entry)]
            out.append(found[0] if len(found) == 1 and entry.startswith("GPU-") else None)
            if out[-1] is None:
                _say_once(
                    "uuid",
                    "CUDA_VISIBLE_DEVICES names %s, which this module cannot number as NVML "
                    "does (%s): the frameworks' views of that GPU are not sent"
                    % (entry, "a MIG instance" if entry.startswith("MIG-")
                       else "nvidia-ml-py is not importable" if not uuids
                       else "no single GPU has that UUID"),
                )
        else:
            break
    return out


def _nvml_uuids():
    """Every GPU's UUID in NVML's order, through nvidia-ml-py; [] without it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        uuids = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            u = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
            uuids.append(u.decode() if isinstance(u, bytes) else u)
        return uuids
    except Exception:
        return []


def _nvml_index(visible):
    """memrel's ``cuda:N`` (NVML's index) of a framework's visible GPU."""
    global _visible
    if _visible is None:
        _visible = _visible_devices()
    if _visible is False:
        return visible
    return _visible[visible] if 0 <= visible < len(_visible) else None


_torch_seen = set()  # the GPUs torch reserved bytes on (sent from then on)


def _torch_views(views):
    """PyTorch's allocated and reserved bytes per GPU it used, and its pinned
    host cache; only where the program imported torch and initialised CUDA
    (this module never does either)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_initialized():
            return
        for i in range(cuda.device_count()):
            stats = cuda.memory_stats_as_nested_dict(i)
            allocated = stats.get("allocated_bytes", {}).get("all", {}).get("current", 0)
            reserved = stats.get("reserved_bytes", {}).get("all", {}).get("current", 0)
            n = _nvml_index(i)
            if n is None or (reserved == 0 and i not in _torch_seen):
                continue  # a GPU torch never used (or cannot be numbered)
            _torch_seen.add(i)
            views["cuda:%d.torch_allocated" % n] = allocated
            views["cuda:%d.torch_reserved" % n] = reserved
        host = getattr(getattr(cuda, "memory", None), "host_memory_stats_as_nested_dict", None)
        stats = host() if host is not None else {}
        held = _current(stats, "allocated_bytes")
        if held is not None:
            views["host.torch_pinned_held"] = held
            in_use = _current(stats, "active_bytes")
            if in_use is not None and in_use <= held and _torch_counts_pinned_frees(torch):
                views["host.torch_pinned_in_use"] = in_use
    except Exception as e:
        _say_once("torch", "PyTorch's memory view failed (%s); not sent" % _first_line(e))


def _current(stats, key):
    """``stats[key]["current"]`` of a nested statistics dict, or None."""
    value = stats.get(key)
    return value.get("current") if isinstance(value, dict) else None


def _torch_counts_pinned_frees(torch):
    """Whether this torch's pinned host allocator takes a freed block out of
    ``active_bytes``: torch 2.15's source does for every free; 2.11 on an
    H200 did not for a block freed without stream events (``active_bytes``
    stayed, even grew past ``allocated_bytes``), so before 2.15 only the
    held bytes are sent."""
    try:
        major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    except (AttributeError, ValueError):
        return False
    return (major, minor) >= (2, 15)


def _jax_views(views):
    """JAX's bytes in arrays and in its pool per GPU; only once the program
    has imported jax and JAX has started its backends (asking before would
    start them, and XLA would take its share of every GPU)."""
    xb = sys.modules.get("jax._src.xla_bridge")
    backends = getattr(xb, "_backends", None) if "jax" in sys.modules else None
    if not backends:
        return
    try:
        for backend in list(backends.values()):
            for d in backend.local_devices():
                if d.platform not in ("gpu", "cuda"):
                    continue
                stats = d.memory_stats()
                if not stats:
                    continue
                hw = getattr(d, "local_hardware_id", None)
                n = _nvml_index(d.id if hw is None else hw)
                if n is None:
                    continue
                if "bytes_in_use" in stats:
                    views["cuda:%d.jax_in_use" % n] = stats["bytes_in_use"]
                pool = stats.get("pool_bytes", stats.get("bytes_reserved"))
                if pool is not None:
                    views["cuda:%d.jax_pool" % n] = pool
    except Exception as e:
        _say_once("jax", "JAX's memory view failed (%s); not sent" % _first_line(e))


def _views():
    """The frameworks' own views at an edge (``views``: ``cuda:N.torch_reserved``
    and the other words of memrel's readings cell), None where there are none
    or MEMREL_VIEWS=0."""
    if os.environ.get("MEMREL_VIEWS") == "0":
        return None
    views = {}
    _torch_views(views)
    _jax_views(views)
    return views or None


def _with_memory(data):
    """Puts the process's own readings on an edge's message."""
    mem = _memory()
    if mem is not None:
        data["memory"] = mem
    allocator, heap = _heap_view()
    if allocator is not None:
        data["allocator"] = allocator
    if heap is not None:
        data["heap"] = heap
    views = _views()
    if views is not None:
        data["views"] = views


def _mapped_libraries():
    try:
        with open("/proc/self/maps") as f:
            return set(
                parts[5].rstrip("\n")
                for parts in (line.split(None, 5) for line in f)
                if len(parts) == 6
            )
    except OSError:
        return set()


# ---------------------------------------------------------------- environment


class _Strategy(object):
    def __init__(self, name, start, release, problems):
        self.name = name
        self.start = start
        self.release = release
        self.problems = problems  # failed checks for hello


def _parse_strategy(raw):
    if raw is None or raw.strip() == "":
        return _Strategy("none", [], [], [])
    problems = []
    try:
        value = json.loads(raw)
    except ValueError as e:
        return _Strategy(
            "invalid",
            [],
            [],
            [_check("strategy", False, "MEMREL_STRATEGY is not JSON (%s): %.200s" % (e, raw))],
        )
    if not isinstance(value, dict):
        return _Strategy(
            "invalid", [], [], [_check("strategy", False, "MEMREL_STRATEGY is not a JSON object")]
        )
    name = value.get("name")
    if not isinstance(name, str) or not name:
        problems.append(_check("strategy", False, "MEMREL_STRATEGY has no \"name\" string"))
        name = "unnamed"
    lists = {}
    for key in ("start", "release"):
        items = value.get(key, [])
        if not isinstance(items, list) or not all(isinstance(a, str) for a in items):
            problems.append(
                _check("strategy", False, "MEMREL_STRATEGY's %r is not a list of strings" % key)
            )
            items = []
        lists[key] = items
    release = []
    for action in lists["release"]:
        if action in RELEASE_ACTIONS:
            release.append(action)
        else:
            hint = " (a start action)" if action.split("=")[0] in START_ACTIONS else ""
            problems.append(
                _check(
                    "release %s" % action,
                    False,
                    "unknown release action %r%s, ignored; known: %s"
                    % (action, hint, ", ".join(RELEASE_ACTIONS)),
                )
            )
    return _Strategy(name, lists["start"], release, problems)


def cycles():
    """How many load/unload cycles the scenario wants (MEMREL_CYCLES, default 1)."""
    raw = os.environ.get("MEMREL_CYCLES", "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError("MEMREL_CYCLES=%r is not a positive integer" % raw)
    return n


def models():
    """Model id -> checkpoint directory (MEMREL_MODELS); {} when unset."""
    raw = os.environ.get("MEMREL_MODELS", "")
    if raw.strip() == "":
        return {}
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise ValueError("MEMREL_MODELS is not JSON (%s): %.200s" % (e, raw)) from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError("MEMREL_MODELS must be a JSON object of model id -> directory")
    return dict(value)


def device():
    """The device the scenario asks for: "cpu" or "cuda:N" (MEMREL_DEVICE)."""
    return os.environ.get("MEMREL_DEVICE", "").strip() or "cpu"


def strategy():
    """The strategy's name ("none" when MEMREL_STRATEGY is unset)."""
    return _strategy.name


def takes_objects():
    """Whether the strategy's release works on the objects passed to
    release() (to_cpu, detach): then pass the model to memrel.release()
    instead of deleting it first, as with accelerate's release_memory."""
    return any(a in _OBJECT_ACTIONS for a in _strategy.release)


# ---------------------------------------------------------------- checks


def _check(name, ok, detail):
    return {"name": name, "ok": bool(ok), "detail": detail}


class _Tally(object):
    """What one release action did over every release() call, for done."""

    def __init__(self):
        self.calls = 0
        self.ran = 0
        self.effect = 0
        self.failed = 0
        self.last = ""
        self.why_not = ""

    def add(self, outcome):
        self.calls += 1
        if outcome.ran:
            self.ran += 1
        if outcome.effect:
            self.effect += 1
        if outcome.failed:
            self.failed += 1
        if not outcome.ran and not self.why_not:
            self.why_not = outcome.text
        self.last = outcome.text

    def check(self, action):
        ok = self.calls > 0 and self.ran == self.calls and self.effect > 0 and not self.failed
        detail = "%d call(s): ran %d, took effect %d" % (self.calls, self.ran, self.effect)
        if self.ran < self.calls and self.why_not:
            detail += "; not run: %s" % self.why_not
        detail += "; last: %s" % self.last
        return _check("release %s" % action, ok, detail)


class _Outcome(object):
    def __init__(self, text, ran=True, effect=True, failed=False):
        self.text = text
        self.ran = ran
        self.effect = effect
        self.failed = failed


def _skipped(action, why):
    return _Outcome("%s skipped: %s" % (action, why), ran=False, effect=False)


def _nothing_on_cpu(action, why):
    """A CUDA step of a strategy for any device (accelerate-release,
    detach-release) on a cpu run: nothing to do there, which is no failure
    (accelerate's release_memory skips it the same way)."""
    if device() == "cpu" and "not initialized" in why:
        return _Outcome("%s: nothing to do on cpu" % action, ran=True, effect=True)
    return _skipped(action, why)


# ---------------------------------------------------------------- start actions


def _start_mallopt(value):
    threshold = 131072
    if value is not None:
        try:
            threshold = int(value)
        except ValueError:
            return False, "mallopt_mmap_threshold=%r: the value is not an integer" % value
    if not _is_glibc():
        return False, "not glibc: no mallopt(M_MMAP_THRESHOLD)"
    fn = _libc().mallopt
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    r = fn(_M_MMAP_THRESHOLD, threshold)
    detail = "mallopt(M_MMAP_THRESHOLD, %d) -> %d" % (threshold, r)
    if r == 1:
        detail += " (threshold set and frozen)"
    if "torch" in sys.modules:
        detail += "; torch was imported before memrel: what it allocated earlier is unaffected"
    return r == 1, detail


def _start_setenv_trim_threshold(value):
    started_with = None
    try:
        with open("/proc/self/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"MALLOC_TRIM_THRESHOLD_="):
                    started_with = item.split(b"=", 1)[1].decode("ascii", "replace")
    except OSError:
        pass
    os.environ["MALLOC_TRIM_THRESHOLD_"] = "-1"
    if started_with is None:
        start = "the process started without it"
    else:
        start = "the process started with MALLOC_TRIM_THRESHOLD_=%s, which glibc did read" % started_with
    return True, (
        "set MALLOC_TRIM_THRESHOLD_=-1 in os.environ inside the running process; %s. "
        "glibc reads its variables only at process start, so this process's malloc is "
        "unchanged (child processes started from now on see it)" % start
    )


# ONNX Runtime: what the strategy asks of the sessions the program makes
# through ort_session() and the requests it runs with ort_run_options().
_ORT_SETTINGS = {
    "ort_arena": "the default CPU arena (enable_cpu_mem_arena = True, next power of two)",
    "ort_no_arena": "SessionOptions.enable_cpu_mem_arena = False",
    "ort_shrink": "run option memory.enable_memory_arena_shrinkage = cpu:0 on every request",
    "ort_same_as_requested": "a shared CPU arena with arena_extend_strategy = 1 (kSameAsRequested)",
}
_ort = {"asked": None, "sessions": [], "requests": 0, "shrink_read_back": 0, "env_allocator": None}
_ort_lock = threading.Lock()


def _start_ort(name):
    _ort["asked"] = name
    return True, (
        "%s for the sessions made with memrel.ort_session() (and requests run with "
        "memrel.ort_run_options()); the done check reads them back" % _ORT_SETTINGS[name]
    )


def _ort_module(ort):
    if ort is not None:
        return ort
    import onnxruntime

    return onnxruntime


def ort_session(model, ort=None, **kwargs):
    """An ``onnxruntime.InferenceSession`` on the CPU for `model` (a path or
    the model's bytes) with the strategy's arena settings: ort-no-arena turns
    the CPU arena off, ort-same-as-requested registers one shared arena that
    grows by what is asked (``arena_extend_strategy`` 1) and makes the session
    use it; any other strategy leaves onnxruntime's defaults. What the session
    really got is read back and reported in the done check."""
    ort = _ort_module(ort)
    asked = _ort["asked"]
    so = ort.SessionOptions()
    if asked == "ort_no_arena":
        so.enable_cpu_mem_arena = False
    if asked == "ort_same_as_requested":
        with _ort_lock:
            if _ort["env_allocator"] is None:
                info = ort.OrtMemoryInfo(
                    "Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT
                )
                ort.create_and_register_allocator(info, ort.OrtArenaCfg({"arena_extend_strategy": 1}))
                _ort["env_allocator"] = "create_and_register_allocator(Cpu arena, arena_extend_strategy=1)"
        so.add_session_config_entry("session.use_env_allocators", "1")
    session = ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"], **kwargs)
    got = session.get_session_options()
    seen = "enable_cpu_mem_arena=%s" % got.enable_cpu_mem_arena
    env = got.get_session_config_entry("session.use_env_allocators") if asked == "ort_same_as_requested" else ""
    if env:
        seen += ", session.use_env_allocators=%s" % env
    with _ort_lock:
        _ort["sessions"].append((got.enable_cpu_mem_arena, env == "1", seen))
    return session


def ort_run_options(ort=None):
    """``onnxruntime.RunOptions`` for one request: under ort-shrink with
    ``memory.enable_memory_arena_shrinkage`` = ``cpu:0`` (the arena frees its
    unused chunks at the end of that run), else plain run options."""
    ort = _ort_module(ort)
    ro = ort.RunOptions()
    shrink = _ort["asked"] == "ort_shrink"
    if shrink:
        ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    with _ort_lock:
        _ort["requests"] += 1
        if shrink and ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0":
            _ort["shrink_read_back"] += 1
    return ro


def _ort_check():
    """Whether the sessions and requests got what the strategy asked, read back."""
    asked = _ort["asked"]
    if asked is None:
        return None
    with _ort_lock:
        sessions = list(_ort["sessions"])
        requests = _ort["requests"]
        shrunk = _ort["shrink_read_back"]
    if not sessions:
        return _check(
            "ort settings", False, "no session was made with memrel.ort_session(): %s was not applied"
            % _ORT_SETTINGS[asked]
        )
    want_arena = asked != "ort_no_arena"
    ok = all(arena == want_arena for arena, _, _ in sessions)
    if asked == "ort_same_as_requested":
        ok = ok and all(env for _, env, _ in sessions) and _ort["env_allocator"] is not None
    detail = "%d session(s), read back: %s" % (len(sessions), sessions[-1][2])
    if _ort["env_allocator"]:
        detail += "; %s" % _ort["env_allocator"]
    if asked == "ort_shrink":
        ok = ok and requests > 0 and shrunk == requests
        detail += "; %d of %d request(s) with memory.enable_memory_arena_shrinkage=cpu:0" % (shrunk, requests)
    else:
        detail += "; %d request(s)" % requests
    return _check("ort settings", ok, "%s: %s" % (_ORT_SETTINGS[asked], detail))


# JAX / XLA: the client reads these once, when it starts.
_XLA_VARS = (
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
)
_xla = {"asked": False, "started_with": {}, "want": {}}


def _start_xla_env(value):
    """`xla_env=KEY:VALUE`: the variable the strategy sets, checked at the end."""
    if value:
        key, _, want = value.partition(":")
        _xla["want"][key] = want
    started = {}
    try:
        with open("/proc/self/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                key, _, value = item.partition(b"=")
                key = key.decode("ascii", "replace")
                if key in _XLA_VARS:
                    started[key] = value.decode("ascii", "replace")
    except OSError:
        started = {k: os.environ[k] for k in _XLA_VARS if k in os.environ}
    _xla["asked"] = True
    _xla["started_with"] = started
    shown = ", ".join("%s=%s" % kv for kv in sorted(started.items())) or "no XLA_PYTHON_CLIENT_* variable"
    return True, "the process started with %s; the done check adds what the XLA client reports" % shown


def _xla_check():
    """The XLA variables the process started with and, once jax is in use,
    its backend and (on a GPU) what the client's allocator reports."""
    if not _xla["asked"]:
        return None
    started = _xla["started_with"]
    want = _xla["want"]
    missing = ["%s=%s" % kv for kv in sorted(want.items()) if started.get(kv[0]) != kv[1]]
    detail = "started with %s" % (
        ", ".join("%s=%s" % kv for kv in sorted(started.items())) or "no XLA_PYTHON_CLIENT_* variable"
    )
    jax = sys.modules.get("jax")
    if jax is None:
        return _check("xla env", False, "%s; jax was never imported, so no XLA client read them" % detail)
    try:
        dev = jax.devices()[0]
        detail += "; jax %s, backend %s (%s)" % (jax.__version__, jax.default_backend(), dev.device_kind)
        stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
        if stats:
            keys = ("bytes_limit", "bytes_reserved", "pool_bytes", "peak_bytes_in_use", "bytes_in_use")
            detail += "; memory_stats: " + ", ".join(
                "%s %s" % (k, _fmt_bytes(stats[k])) for k in keys if k in stats
            )
        elif dev.platform == "cpu":
            detail += "; a CPU client: the XLA_PYTHON_CLIENT_* variables apply to GPU clients only"
    except Exception as e:
        detail += "; jax.devices() failed: %s" % _first_line(e)
    if missing:
        return _check("xla env", False, "%s; not in the environment at start: %s" % (detail, ", ".join(missing)))
    return _check("xla env", True, detail)


def _act_jax_clear(objs):
    jax = sys.modules.get("jax")
    if jax is None:
        return _skipped("jax_clear", "jax is not imported")
    before = _anon()
    t0 = time.perf_counter()
    arrays = list(jax.live_arrays())
    count, nbytes = len(arrays), 0
    for a in arrays:
        nbytes += a.nbytes
        a.delete()
    del arrays
    jax.clear_caches()
    dt = time.perf_counter() - t0
    return _Outcome(
        "jax_clear: deleted %d live array(s) (%s), jax.clear_caches(), %s%s"
        % (count, _fmt_bytes(nbytes), _fmt_ms(dt), _anon_change(before, _anon()))
    )


def _run_start_actions(actions):
    checks = []
    for action in actions:
        name, has_value, value = action.partition("=")
        value = value if has_value else None
        try:
            if name == "mallopt_mmap_threshold":
                ok, detail = _start_mallopt(value)
            elif name == "setenv_trim_threshold":
                ok, detail = _start_setenv_trim_threshold(value)
            elif name in _ORT_SETTINGS:
                ok, detail = _start_ort(name)
            elif name == "xla_env":
                ok, detail = _start_xla_env(value)
            else:
                hint = " (a release action)" if name in RELEASE_ACTIONS else ""
                ok, detail = False, "unknown start action %r%s, nothing done; known: %s" % (
                    action,
                    hint,
                    ", ".join(START_ACTIONS),
                )
        except Exception as e:  # a start action must not stop the program
            ok, detail = False, "failed: %s" % _first_line(e)
        checks.append(_check("start %s" % action, ok, detail))
    return checks


# ---------------------------------------------------------------- release actions


def _torch_cuda():
    """(torch, None) when CUDA is in use in this process, else (None, why)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, "torch is not imported"
    cuda = getattr(torch, "cuda", None)
    if cuda is None:
        return None, "torch has no cuda module"
    try:
        if not cuda.is_initialized():
            return None, "CUDA is not initialized in this process (device %s)" % device()
    except Exception as e:
        return None, "torch.cuda.is_initialized() failed: %s" % _first_line(e)
    return torch, None


def _cuda_device(torch):
    d = device()
    if d.startswith("cuda") and "LOCAL_RANK" not in os.environ:
        return torch.device(d)
    # A rank of a launched group (torchrun) works on the GPU it picked.
    return torch.device("cuda", torch.cuda.current_device())


def _cuda_usage(torch, dev):
    return "allocated %s, reserved %s" % (
        _fmt_bytes(torch.cuda.memory_allocated(dev)),
        _fmt_bytes(torch.cuda.memory_reserved(dev)),
    )


def _act_gc(objs):
    a0 = _anon()
    t0 = time.perf_counter()
    n = gc.collect()
    dt = time.perf_counter() - t0
    return _Outcome("gc.collect: %d objects%s, %s" % (n, _anon_change(a0, _anon()), _fmt_ms(dt)))


def _act_malloc_trim(objs):
    if not _is_glibc():
        return _skipped("malloc_trim", "not glibc")
    fn = _libc().malloc_trim
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    a0 = _anon()
    t0 = time.perf_counter()
    r = fn(0)
    dt = time.perf_counter() - t0
    what = "memory returned" if r == 1 else "nothing to return"
    return _Outcome(
        "malloc_trim(0) -> %d (%s)%s, %s" % (r, what, _anon_change(a0, _anon()), _fmt_ms(dt)),
        effect=(r == 1),
    )


def _act_allocator_release(objs):
    libc = _libc()
    libs = _mapped_libraries()

    def loaded(stem):
        return any(stem in os.path.basename(p) for p in libs)

    a0 = _anon()
    t0 = time.perf_counter()
    if hasattr(libc, "mallctl"):
        fn = libc.mallctl
        fn.argtypes = [
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        fn.restype = ctypes.c_int
        r = fn(b"arena.4096.purge", None, None, None, 0)
        call, effect = "jemalloc mallctl(\"arena.4096.purge\") -> %d" % r, r == 0
    elif hasattr(libc, "MallocExtension_ReleaseFreeMemory"):
        fn = libc.MallocExtension_ReleaseFreeMemory
        fn.argtypes = []
        fn.restype = None
        fn()
        call, effect = "tcmalloc MallocExtension_ReleaseFreeMemory()", True
    elif hasattr(libc, "mi_collect"):
        fn = libc.mi_collect
        fn.argtypes = [ctypes.c_bool]
        fn.restype = None
        fn(True)
        call, effect = "mimalloc mi_collect(true)", True
    else:
        seen = [s for s in ("jemalloc", "tcmalloc", "mimalloc") if loaded("lib" + s)]
        why = "no jemalloc, tcmalloc or mimalloc release call in the process"
        if seen:
            why += " (%s is mapped but exports none)" % ", ".join(seen)
        else:
            why += " (glibc malloc: malloc_trim is its release)"
        return _skipped("allocator_release", why)
    dt = time.perf_counter() - t0
    return _Outcome("%s%s, %s" % (call, _anon_change(a0, _anon()), _fmt_ms(dt)), effect=effect)


def _act_to_cpu(objs):
    moved = []
    for i, obj in enumerate(objs):
        to = getattr(obj, "to", None)
        if obj is not None and callable(to):
            objs[i] = to("cpu")
            moved.append(type(obj).__name__)
    if not moved:
        return _Outcome(
            "to_cpu: none of the %d object(s) passed has .to" % len(objs), effect=False
        )
    return _Outcome('to_cpu: .to("cpu") on %d object(s) (%s)' % (len(moved), ", ".join(moved)))


def _act_detach(objs):
    torch = sys.modules.get("torch")
    params = grads = grad_bytes = 0
    cleared = state_tensors = state_bytes = 0
    for obj in objs:
        parameters = getattr(obj, "parameters", None)
        if callable(parameters):
            if torch is None:
                return _skipped("detach", "torch is not imported")
            with torch.no_grad():
                for p in parameters():
                    p.detach_()
                    if p.grad is not None:
                        grads += 1
                        grad_bytes += p.grad.numel() * p.grad.element_size()
                        p.grad = None
                    params += 1
        elif isinstance(getattr(obj, "state", None), dict) and hasattr(obj, "param_groups"):
            for per_param in obj.state.values():
                for v in per_param.values() if isinstance(per_param, dict) else ():
                    if hasattr(v, "element_size") and hasattr(v, "numel"):
                        state_tensors += 1
                        state_bytes += v.numel() * v.element_size()
            obj.state.clear()
            cleared += 1
    if not params and not cleared:
        return _Outcome(
            "detach: none of the %d object(s) passed has .parameters() or optimizer state"
            % len(objs),
            effect=False,
        )
    parts = []
    if params:
        parts.append(
            "%d parameters detached, %d grads (%s) set to None"
            % (params, grads, _fmt_bytes(grad_bytes))
        )
    if cleared:
        parts.append(
            "%d optimizer state(s) cleared (%d tensors, %s)"
            % (cleared, state_tensors, _fmt_bytes(state_bytes))
        )
    return _Outcome("detach: " + "; ".join(parts))


def _act_cuda_synchronize(objs):
    torch, why = _torch_cuda()
    if torch is None:
        return _nothing_on_cpu("cuda_synchronize", why)
    dev = _cuda_device(torch)
    t0 = time.perf_counter()
    torch.cuda.synchronize(dev)
    dt = time.perf_counter() - t0
    return _Outcome("cuda.synchronize: waited %s (%s)" % (_fmt_ms(dt), _cuda_usage(torch, dev)))


def _pinned_held(torch):
    """Bytes PyTorch's pinned host allocator holds, None where unknown."""
    try:
        return torch.cuda.host_memory_stats().get("allocated_bytes.current")
    except (AttributeError, RuntimeError):
        return None


def _act_host_empty_cache(objs):
    torch, why = _torch_cuda()
    if torch is None:
        return _nothing_on_cpu("host_empty_cache", why)
    empty = getattr(torch._C, "_host_emptyCache", None)
    if empty is None:
        return _skipped("host_empty_cache", "this torch has no torch._C._host_emptyCache")
    before = _pinned_held(torch)
    t0 = time.perf_counter()
    empty()
    dt = time.perf_counter() - t0
    after = _pinned_held(torch)
    if before is None or after is None:
        return _Outcome("host_empty_cache: %s (pinned cache not readable)" % _fmt_ms(dt))
    return _Outcome(
        "host_empty_cache: pinned held %s -> %s, %s"
        % (_fmt_bytes(before), _fmt_bytes(after), _fmt_ms(dt)),
        effect=after < before,
    )


def _act_empty_cache(objs):
    torch, why = _torch_cuda()
    if torch is None:
        return _nothing_on_cpu("empty_cache", why)
    dev = _cuda_device(torch)
    before = torch.cuda.memory_reserved(dev)
    t0 = time.perf_counter()
    torch.cuda.empty_cache()
    dt = time.perf_counter() - t0
    after = torch.cuda.memory_reserved(dev)
    return _Outcome(
        "empty_cache: reserved %s -> %s (allocated %s), %s"
        % (
            _fmt_bytes(before),
            _fmt_bytes(after),
            _fmt_bytes(torch.cuda.memory_allocated(dev)),
            _fmt_ms(dt),
        ),
        effect=after < before,
    )


def _act_ipc_collect(objs):
    torch, why = _torch_cuda()
    if torch is None:
        return _nothing_on_cpu("ipc_collect", why)
    dev = _cuda_device(torch)
    before = torch.cuda.memory_reserved(dev)
    torch.cuda.ipc_collect()
    return _Outcome(
        "ipc_collect: reserved %s -> %s"
        % (_fmt_bytes(before), _fmt_bytes(torch.cuda.memory_reserved(dev)))
    )


def _act_clear_cublas_workspaces(objs):
    torch, why = _torch_cuda()
    if torch is None:
        return _nothing_on_cpu("clear_cublas_workspaces", why)
    fn = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if fn is None:
        return _skipped(
            "clear_cublas_workspaces", "torch._C._cuda_clearCublasWorkspaces is missing"
        )
    dev = _cuda_device(torch)
    before = torch.cuda.memory_allocated(dev)
    fn()
    after = torch.cuda.memory_allocated(dev)
    return _Outcome(
        "clear_cublas_workspaces: allocated %s -> %s (reserved %s)"
        % (_fmt_bytes(before), _fmt_bytes(after), _fmt_bytes(torch.cuda.memory_reserved(dev)))
    )


def _act_destroy_process_group(objs):
    try:
        import torch.distributed as dist
    except Exception as e:
        return _skipped("destroy_process_group", "torch.distributed: %s" % _first_line(e))
    if not (dist.is_available() and dist.is_initialized()):
        return _skipped("destroy_process_group", "no process group in this process")
    backend = dist.get_backend()
    t0 = time.perf_counter()
    dist.destroy_process_group()
    dt = time.perf_counter() - t0
    return _Outcome("destroy_process_group: %s group, %s" % (backend, _fmt_ms(dt)))


def _find_cudart():
    for path in sorted(_mapped_libraries()):
        if os.path.basename(path).startswith("libcudart.so"):
            return path
    return None


def _act_device_reset(objs):
    torch, why = _torch_cuda()
    if torch is None:
        return _skipped("device_reset", why)
    path = _find_cudart()
    if path is None:
        return _skipped(
            "device_reset", "no libcudart.so is mapped in this process (statically linked?)"
        )
    dev = _cuda_device(torch)
    mode = getattr(os, "RTLD_NOW", 2) | getattr(os, "RTLD_NOLOAD", 4)
    try:
        cudart = ctypes.CDLL(path, mode=mode)
    except OSError as e:
        return _skipped("device_reset", "cannot open the loaded %s: %s" % (path, e))
    set_device = cudart.cudaSetDevice
    set_device.argtypes = [ctypes.c_int]
    set_device.restype = ctypes.c_int
    reset = cudart.cudaDeviceReset
    reset.argtypes = []
    reset.restype = ctypes.c_int
    s = set_device(dev.index if dev.index is not None else 0)
    t0 = time.perf_counter()
    r = reset()
    dt = time.perf_counter() - t0
    text = "cudaDeviceReset() -> %d%s via %s, %s" % (
        r,
        " (cudaSuccess)" if r == 0 else "",
        os.path.basename(path),
        _fmt_ms(dt),
    )
    if s != 0:
        text += " (cudaSetDevice -> %d)" % s
    # memrel samples from outside: give it time to see the VRAM with no
    # context before the probe below creates a new one.
    time.sleep(0.1)
    # Unsupported: PyTorch still holds pointers into the destroyed context
    # (cached blocks, cuBLAS handles). Try small CUDA calls and say what
    # happened; a crash here kills the process, so say on stderr first.
    try:
        sys.stderr.write("memrel: %s; now probing torch on %s\n" % (text, dev))
        sys.stderr.flush()
        import faulthandler

        if not faulthandler.is_enabled():
            faulthandler.enable()
    except Exception:
        pass

    def small_tensor():
        x = torch.zeros(1, device=dev)
        torch.cuda.synchronize(dev)
        del x

    def matmul():
        x = torch.ones(64, 64, device=dev)
        (x @ x)[0, 0].item()
        del x

    probes = [
        ("torch.zeros(1, device=%r) + torch.cuda.synchronize()" % str(dev), small_tensor),
        ("a 64x64 matmul (cuBLAS) + .item()", matmul),
    ]
    results, works = [], True
    for what, probe in probes:
        try:
            probe()
            results.append("%s: worked" % what)
        except Exception as e:
            results.append("%s: %s" % (what, _first_line(e)))
            works = False
            break
    return _Outcome(
        "%s; afterwards %s" % (text, "; ".join(results)),
        effect=(r == 0 and works),
        failed=not works,
    )


_ACTIONS = {
    "gc": _act_gc,
    "malloc_trim": _act_malloc_trim,
    "allocator_release": _act_allocator_release,
    "to_cpu": _act_to_cpu,
    "detach": _act_detach,
    "cuda_synchronize": _act_cuda_synchronize,
    "empty_cache": _act_empty_cache,
    "host_empty_cache": _act_host_empty_cache,
    "ipc_collect": _act_ipc_collect,
    "clear_cublas_workspaces": _act_clear_cublas_workspaces,
    "device_reset": _act_device_reset,
    "destroy_process_group": _act_destroy_process_group,
    "jax_clear": _act_jax_clear,
}
RELEASE_ACTIONS = tuple(_ACTIONS)


# ---------------------------------------------------------------- phases


_open_lock = threading.Lock()
_open = {}  # (phase, model) -> [perf_counter at begin, ...]
_tracer = None  # memrel's --trace-allocations (_trace.Tracer), set at import


def _open_tracer(measured):
    """(tracer, None), or (None, a failed check), where memrel named a file
    in MEMREL_TRACE_ALLOCATIONS for this process; (None, None) otherwise.
    Popped: a child process started from here does not trace into it."""
    path = os.environ.pop("MEMREL_TRACE_ALLOCATIONS", None)
    if not path or not measured:
        return None, None
    try:
        from memrel import _trace

        return _trace.Tracer(path), None
    except Exception as e:
        return None, _check("trace allocations", False, "not traced: %s" % _first_line(e))


def _validate(name, model):
    if name not in PHASES:
        raise ValueError("unknown memrel phase %r; phases: %s" % (name, ", ".join(PHASES)))
    if model is not None and not isinstance(model, str):
        raise TypeError("memrel phase model must be a str or None, not %s" % type(model).__name__)


def begin(name, model=None):
    """Send the begin edge of phase `name` (for `model`, if given)."""
    _validate(name, model)
    if _tracer is not None:
        _tracer.at_begin(name)
    with _open_lock:
        _open.setdefault((name, model), []).append(time.perf_counter())
    # CLOCK_MONOTONIC (time.monotonic on Linux): memrel stamps the edge with
    # it, not with the moment the line is read.
    data = {"phase": name, "edge": "begin", "mono_s": time.monotonic()}
    if model is not None:
        data["model"] = model
    _with_memory(data)
    _channel.send("phase", data)


def end(name, model=None, note=None):
    """Send the end edge of phase `name`, with the seconds since its begin."""
    _validate(name, model)
    now = time.perf_counter()
    with _open_lock:
        starts = _open.get((name, model))
        if not starts:
            raise ValueError(
                "memrel.end(%r%s) without a matching memrel.begin"
                % (name, "" if model is None else ", model=%r" % model)
            )
        started = starts.pop()
        if not starts:
            del _open[(name, model)]
    data = {"phase": name, "edge": "end", "mono_s": time.monotonic()}
    if model is not None:
        data["model"] = model
    data["elapsed_s"] = round(now - started, 6)
    _with_memory(data)
    if note is not None:
        data["note"] = str(note)
    _channel.send("phase", data)
    if _tracer is not None:
        _tracer.at_end(name)


class phase(object):
    """``with memrel.phase("load", model="bert") as p: ...`` sends both edges.

    Set ``p.note`` inside the block to put a note on the end edge. When the
    block raises, the end edge is still sent, its note naming the exception.
    """

    def __init__(self, name, model=None, note=None):
        _validate(name, model)
        self.name = name
        self.model = model
        self.note = note

    def __enter__(self):
        begin(self.name, self.model)
        return self

    def __exit__(self, exc_type, exc, tb):
        note = self.note
        if exc_type is not None:
            raised = "raised %s" % (_first_line(exc) if exc is not None else exc_type.__name__)
            note = raised if note is None else "%s; %s" % (note, raised)
        end(self.name, self.model, note)
        return False


#: How long ``baseline()`` sleeps when given no time, in seconds: 50
#: readings at memrel's default 10 ms interval, and what its examples use.
BASELINE_DEFAULT_S = 0.5


def baseline(seconds=BASELINE_DEFAULT_S):
    """A baseline phase that sleeps `seconds` (default ``BASELINE_DEFAULT_S``, 0.5 s)."""
    with phase("baseline"):
        time.sleep(seconds)


def settle(seconds):
    """A settle phase that sleeps `seconds`."""
    with phase("settle"):
        time.sleep(seconds)


# ---------------------------------------------------------------- release


_tallies = {}  # action -> _Tally, in the order first run
_tally_lock = threading.Lock()


def release(*objects):
    """A release phase that runs the strategy's release actions, in order.

    Returns ``[None] * len(objects)`` (None when no objects), as accelerate's
    release_memory does: ``model, optimizer = memrel.release(model, optimizer)``.
    The objects are still referenced by the caller while the actions run: what
    only they hold goes back to the allocator at that assignment, after the
    release (to_cpu and detach free what they move or clear during it).
    """
    objs = list(objects)
    count = len(objs)
    del objects
    actions = _strategy.release
    last_object_action = max(
        [i for i, a in enumerate(actions) if a in _OBJECT_ACTIONS] or [-1]
    )
    notes = []
    begin("release")
    try:
        if last_object_action < 0:
            del objs[:]
        for i, action in enumerate(actions):
            try:
                outcome = _ACTIONS[action](objs)
            except Exception as e:
                outcome = _Outcome(
                    "%s failed: %s" % (action, _first_line(e)), ran=False, effect=False, failed=True
                )
            if i == last_object_action:
                # The module holds no reference past the last action that uses them.
                del objs[:]
            notes.append(outcome.text)
            with _tally_lock:
                _tallies.setdefault(action, _Tally()).add(outcome)
    finally:
        del objs[:]
        if not actions:
            notes.append("no release actions (strategy %s)" % _strategy.name)
        end("release", note="; ".join(notes))
    return [None] * count if count else None


# ---------------------------------------------------------------- lifecycle


_failed = False


def _at_exit():
    if _failed:
        return
    checks = []
    with _tally_lock:
        for action, tally in _tallies.items():
            checks.append(tally.check(action))
    for extra in (_ort_check(), _xla_check()):
        if extra is not None:
            checks.append(extra)
    with _open_lock:
        still_open = sorted(
            "%s%s" % (p, "" if m is None else "(%s)" % m) for (p, m), s in _open.items() if s
        )
    if still_open:
        checks.append(
            _check("phases", False, "begun but never ended: %s" % ", ".join(still_open))
        )
    data = {}
    hwm = _status_fields(("VmHWM",)).get("VmHWM")
    if hwm is not None:
        data["vm_hwm_bytes"] = hwm
    data["checks"] = checks
    _channel.send("done", data)


def _error_message(exc_type, exc, tb):
    message = _first_line(exc) if exc is not None else exc_type.__name__
    where = None
    while tb is not None:
        where = tb
        tb = tb.tb_next
    if where is not None:
        code = where.tb_frame.f_code
        message += " (at %s:%d in %s)" % (
            os.path.basename(code.co_filename),
            where.tb_lineno,
            code.co_name,
        )
    return message


_previous_excepthook = sys.excepthook


def _excepthook(exc_type, exc, tb):
    global _failed
    _failed = True
    try:
        _channel.send("error", {"message": _error_message(exc_type, exc, tb)})
    except Exception:
        pass
    _previous_excepthook(exc_type, exc, tb)


_channel = _Channel()
_strategy = _parse_strategy(os.environ.get("MEMREL_STRATEGY"))
_hello_checks = _strategy.problems + _run_start_actions(_strategy.start)
_tracer, _trace_problem = _open_tracer(_channel.fd is not None)
if _trace_problem is not None:
    _hello_checks.append(_trace_problem)
_channel.send(
    "hello",
    {
        "pid": os.getpid(),
        "strategy": _strategy.name,
        "device": device(),
        "checks": _hello_checks,
    },
)
sys.excepthook = _excepthook
atexit.register(_at_exit)
