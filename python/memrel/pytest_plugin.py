"""memrel's pytest plugin: fail a test whose memory does not go back.

pytest-memray counts allocations; what a server operator sees is what the
system sees. This plugin measures that from outside: for each test marked
``@pytest.mark.memrel(...)`` and run with ``pytest --memrel``, the memrel
binary attaches to the pytest process (``memrel attach --no-tree PID``),
phases are marked with ``memrel mark``, and after the test, ``gc.collect()``
and the named release step, the memory retained above the baseline (host RSS,
and VRAM per CUDA device with ``max_vram_retained_mib``) is compared with the
marker's limits::

    @pytest.mark.memrel(max_retained_mib=64, release="malloc-trim", warmups=1)
    def test_reload(): ...

The measured process is pytest itself, so what a test "retains" is memory
still held after it returned: objects that outlive it (a global, a cache, a
fixture of a wider scope) and memory it freed that the allocator kept.
Function-scoped fixtures are set up before the baseline and torn down after
the measurement: they count neither way.

Phases per test (one ``memrel attach`` each, results in one directory):
``warmup`` (the test body called ``warmups`` extra times, so caches fill),
``baseline`` (idle), ``load`` (the measured call), ``unload`` (gc.collect),
``release`` (the release step), ``settle`` (idle), then the measurement
stops and ``summary.json`` is read. docs/pytest.md has the options, the
message and a CI snippet.
"""

import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import memrel

_MIB = 1024 * 1024
_MARKER_KEYS = ("max_retained_mib", "max_vram_retained_mib", "release", "warmups")
# Release actions that need no objects (to_cpu and detach work on the objects
# passed to memrel.release(), which a test marker cannot name).
_RELEASE_STEPS = tuple(a for a in memrel.RELEASE_ACTIONS if a not in memrel._OBJECT_ACTIONS)
_POLL_S = 0.002
_START_TIMEOUT_S = 30.0
_MARK_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 120.0
_MARKER_HELP = (
    "memrel(max_retained_mib=None, max_vram_retained_mib=None, release=None, warmups=0): "
    "with --memrel, fail the test when the host memory (or VRAM) of the pytest process, "
    "measured from outside by memrel, stays more than the limit above its baseline after "
    "the test, gc.collect() and the release step (%s)" % ", ".join(_RELEASE_STEPS)
)


class MeasureError(Exception):
    """memrel could not measure the test (no binary, not attachable, crashed)."""


# ---------------------------------------------------------------- options


def pytest_addoption(parser):
    group = parser.getgroup("memrel", "memory that goes back (memrel)")
    group.addoption(
        "--memrel",
        action="store_true",
        default=False,
        help="measure the tests marked @pytest.mark.memrel with the memrel binary "
        "(MEMREL_BIN, else the one beside this Python, else memrel on PATH)",
    )
    group.addoption(
        "--memrel-dir",
        metavar="DIR",
        default=None,
        help="keep each measured test's results (samples, events, summary.json, "
        "timeline.png) in DIR/<test>; default: a temporary directory, removed at the "
        "end unless a measured test failed",
    )
    group.addoption(
        "--memrel-device",
        metavar="DEVICE",
        default=None,
        help="also sample this CUDA device's VRAM for every measured test (cuda or "
        "cuda:N); a marker with max_vram_retained_mib samples cuda when this is not given",
    )
    group.addoption(
        "--memrel-interval-ms",
        metavar="MS",
        type=float,
        default=10.0,
        help="sampling interval in milliseconds (default 10)",
    )
    group.addoption(
        "--memrel-settle-ms",
        metavar="MS",
        type=float,
        default=100.0,
        help="idle time after the release step before memory is read (default 100)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", _MARKER_HELP)
    if not config.getoption("memrel"):
        return
    interval_ms = config.getoption("memrel_interval_ms")
    if not 1.0 <= interval_ms <= 10000.0:
        raise pytest.UsageError(
            "--memrel-interval-ms %s: must be 1 to 10000 milliseconds" % interval_ms
        )
    settle_ms = config.getoption("memrel_settle_ms")
    if settle_ms < 0:
        raise pytest.UsageError("--memrel-settle-ms %s: must be 0 or more" % settle_ms)
    device = config.getoption("memrel_device")
    if device is not None and not re.fullmatch(r"cuda(:\d+)?", device):
        raise pytest.UsageError("--memrel-device %r: must be cuda or cuda:N" % device)
    config.pluginmanager.register(_Plugin(config), "memrel-measure")


def pytest_collection_modifyitems(config, items):
    # Checked with or without --memrel: a typo in a marker is found at once.
    for item in items:
        marker = item.get_closest_marker("memrel")
        if marker is not None:
            limits_of(marker, item.nodeid)


class Limits(object):
    def __init__(self, max_retained_mib, max_vram_retained_mib, release, warmups):
        self.max_retained_mib = max_retained_mib
        self.max_vram_retained_mib = max_vram_retained_mib
        self.release = release
        self.warmups = warmups


def limits_of(marker, nodeid):
    """The marker's settings, or a pytest usage error naming what is wrong."""

    def bad(what):
        return pytest.UsageError("@pytest.mark.memrel on %s: %s" % (nodeid, what))

    if marker.args:
        raise bad(
            "takes keywords only (%s), not positional arguments %r"
            % (", ".join(_MARKER_KEYS), marker.args)
        )
    unknown = sorted(set(marker.kwargs) - set(_MARKER_KEYS))
    if unknown:
        raise bad(
            "unknown keyword %s; the keywords are %s"
            % (", ".join(unknown), ", ".join(_MARKER_KEYS))
        )
    kw = marker.kwargs
    limits = []
    for key in ("max_retained_mib", "max_vram_retained_mib"):
        value = kw.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad("%s=%r: must be a number of MiB" % (key, value))
            if value < 0 or value != value:
                raise bad("%s=%r: must not be negative" % (key, value))
        limits.append(value)
    warmups = kw.get("warmups", 0)
    if isinstance(warmups, bool) or not isinstance(warmups, int) or warmups < 0:
        raise bad("warmups=%r: must be a whole number, 0 or more" % (warmups,))
    return Limits(limits[0], limits[1], release_steps(kw.get("release"), bad), warmups)


def release_steps(release, bad):
    """The release actions a marker names: None, one name or a list of names;
    "malloc-trim" and "malloc_trim" are the same action."""
    if release is None:
        return []
    names = [release] if isinstance(release, str) else release
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise bad("release=%r: must be None, an action name or a list of them" % (release,))
    steps = []
    for name in names:
        action = name.replace("-", "_")
        if action not in _RELEASE_STEPS:
            raise bad(
                "release=%r: unknown release action %r; the actions are %s"
                % (release, name, ", ".join(a.replace("_", "-") for a in _RELEASE_STEPS))
            )
        steps.append(action)
    return steps


# ---------------------------------------------------------------- the binary


def find_binary():
    """MEMREL_BIN, else the memrel beside this Python (a venv's bin/), else PATH."""
    env = os.environ.get("MEMREL_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise MeasureError(
                "MEMREL_BIN=%s is not an executable file; point it at the memrel binary" % env
            )
        return env
    beside = os.path.join(os.path.dirname(sys.executable), "memrel")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("memrel")
    if found:
        return found
    raise MeasureError(
        "no memrel binary: not beside %s nor on PATH; `pip install memrel` into this "
        "environment, or set MEMREL_BIN to the binary" % sys.executable
    )


class Attach(object):
    """One `memrel attach --dir DIR PID` measuring this process, and its marks."""

    def __init__(self, binary, out_dir, interval_ms, device):
        self.binary = binary
        self.dir = out_dir
        self.edges = 0
        self.open = False
        self.log = tempfile.TemporaryFile(prefix="memrel-attach-")
        argv = [
            binary,
            "attach",
            "--dir",
            out_dir,
            "--no-tree",
            "--interval-ms",
            "%g" % interval_ms,
            "--out",
            out_dir,
        ]
        if device is not None:
            argv += ["--device", device]
        argv.append(str(os.getpid()))
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT
            )
        except OSError as e:
            self.log.close()
            raise MeasureError("cannot start %s: %s" % (binary, e)) from None
        live = os.path.join(out_dir, "live")
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not os.path.exists(live):
            if self.proc.poll() is not None:
                raise MeasureError(
                    "memrel attach could not measure this process (pid %d), exit %d: %s"
                    % (os.getpid(), self.proc.returncode, self.output())
                )
            if time.monotonic() > deadline:
                self.kill()
                raise MeasureError(
                    "memrel attach did not start measuring within %d s: %s"
                    % (_START_TIMEOUT_S, self.output())
                )
            time.sleep(_POLL_S)

    def output(self):
        """What attach printed, as one string."""
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace").strip()

    def mark(self, phase):
        """Marks `phase` (or `end`) and waits until attach has read the memory
        at its edges, so what the test does next is not in that reading."""
        done = subprocess.run(
            [self.binary, "mark", self.dir, phase],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        if done.returncode != 0:
            raise MeasureError(
                "memrel mark %s %s failed (exit %d): %s; memrel attach said: %s"
                % (
                    self.dir,
                    phase,
                    done.returncode,
                    done.stdout.decode("utf-8", "replace").strip(),
                    self.output(),
                )
            )
        self.edges += int(self.open) + int(phase != "end")
        self.open = phase != "end"
        events = os.path.join(self.dir, "events.csv")
        deadline = time.monotonic() + _MARK_TIMEOUT_S
        while _count_lines(events) - 1 < self.edges:
            if self.proc.poll() is not None:
                raise MeasureError(
                    "memrel attach ended (exit %d) before the %s mark was recorded: %s"
                    % (self.proc.returncode, phase, self.output())
                )
            if time.monotonic() > deadline:
                raise MeasureError(
                    "memrel attach did not record the %s mark within %d s" % (phase, _MARK_TIMEOUT_S)
                )
            time.sleep(_POLL_S)

    def stop(self):
        """Ends the measurement (SIGTERM: attach writes its results) and
        returns summary.json, read."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise MeasureError(
                "memrel attach did not finish its results within %d s" % _STOP_TIMEOUT_S
            ) from None
        text = self.output()
        self.log.close()
        _write(os.path.join(self.dir, "attach.log"), text + "\n")
        if rc != 0:
            raise MeasureError("memrel attach failed (exit %d): %s" % (rc, text))
        path = os.path.join(self.dir, "summary.json")
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            raise MeasureError("cannot read %s: %s" % (path, e)) from None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.log.closed:
            self.log.close()


def _count_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


def _write(path, text):
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        pass


# ---------------------------------------------------------------- results


class Row(object):
    """One resource of one measured test."""

    def __init__(self, resource, baseline, peak, after, retained, limit_mib):
        self.resource = resource
        self.baseline = baseline
        self.peak = peak
        self.after = after
        self.retained = retained
        self.limit_mib = limit_mib

    @property
    def over(self):
        return (
            self.limit_mib is not None
            and self.retained is not None
            and self.retained > self.limit_mib * _MIB
        )


def rows_of(summary, limits):
    """Baseline, peak, after and retained per resource of the one run."""
    runs = summary.get("runs") or []
    if not runs:
        raise MeasureError("summary.json has no run")
    rows = []
    for res in runs[0].get("resources") or []:
        name = res.get("resource", "?")
        cycles = res.get("cycles") or []
        cycle = cycles[-1] if cycles else {}
        limit = limits.max_vram_retained_mib if name.startswith("cuda") else limits.max_retained_mib
        rows.append(
            Row(
                name,
                res.get("baseline_bytes"),
                res.get("peak_bytes"),
                cycle.get("after_release_bytes"),
                cycle.get("retained_bytes"),
                limit,
            )
        )
    return rows


def _mib(n):
    if n is None:
        return "-"
    text = "%.1f" % (n / float(_MIB))
    return "0.0" if text == "-0.0" else text


def _limit(row):
    return "-" if row.limit_mib is None else "%g" % row.limit_mib


def table(rows, first=None):
    """Rows as aligned text; `first` puts a leading column (the test)."""
    head = ["resource", "baseline MiB", "peak MiB", "after MiB", "retained MiB", "limit MiB", ""]
    lines = [head]
    for r in rows:
        verdict = "OVER" if r.over else ("ok" if r.limit_mib is not None else "")
        lines.append(
            [r.resource, _mib(r.baseline), _mib(r.peak), _mib(r.after), _mib(r.retained), _limit(r), verdict]
        )
    if first is not None:
        lines = [[first[0]] + lines[0]] + [[t] + line for t, line in zip(first[1:], lines[1:])]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for line in lines:
        cells = [
            c.ljust(w) if i == 0 or (first is not None and i == 1) else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths))
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


# ---------------------------------------------------------------- measuring


def _dir_name(nodeid):
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_.") or "test"
    if len(name) > 120:
        import hashlib

        name = name[:100] + "-" + hashlib.sha1(nodeid.encode()).hexdigest()[:12]
    return name


class Measured(object):
    def __init__(self, nodeid, out_dir, limits=None):
        self.nodeid = nodeid
        self.dir = out_dir
        self.limits = limits
        self.rows = []
        self.error = None
        self.failed = False
        self.over = False
        self.release_notes = []  # what each release step did, as memrel.release says it


class _Plugin(object):
    def __init__(self, config):
        self.config = config
        self.interval_ms = config.getoption("memrel_interval_ms")
        self.settle_s = config.getoption("memrel_settle_ms") / 1000.0
        self.device = config.getoption("memrel_device")
        keep = config.getoption("memrel_dir")
        if keep is not None:
            self.root = os.path.abspath(keep)
            self.temporary = False
        else:
            self.root = tempfile.mkdtemp(prefix="memrel-pytest-")
            self.temporary = True
        self.results = []
        self.attaches = {}  # nodeid -> (Attach, Measured, Limits)

    def _fresh_dir(self, nodeid):
        path = os.path.join(self.root, _dir_name(nodeid))
        if os.path.isdir(path) and os.listdir(path):
            if not os.path.exists(os.path.join(path, "marks.jsonl")):
                raise MeasureError(
                    "%s is not empty and holds no memrel results (no marks.jsonl): "
                    "choose another --memrel-dir" % path
                )
            shutil.rmtree(path)  # a previous run of this test
        os.makedirs(path, exist_ok=True)
        return path

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item):
        # After the fixtures are set up: memrel not found or refused is an
        # error of the test (ERROR), not a pass nor a failure of it.
        result = yield
        marker = item.get_closest_marker("memrel")
        if marker is None:
            return result
        limits = limits_of(marker, item.nodeid)
        device = self.device
        if device is None and limits.max_vram_retained_mib is not None:
            device = "cuda"
        out_dir = None
        try:
            binary = find_binary()
            out_dir = self._fresh_dir(item.nodeid)
            attach = Attach(binary, out_dir, self.interval_ms, device)
        except MeasureError as e:
            measured = Measured(item.nodeid, out_dir)
            measured.error = str(e)
            self.results.append(measured)
            raise pytest.fail.Exception("memrel: %s" % e, pytrace=False) from None
        self.attaches[item.nodeid] = (attach, Measured(item.nodeid, out_dir, limits), limits)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        entry = self.attaches.pop(item.nodeid, None)
        if entry is None:
            return (yield)
        attach, measured, limits = entry
        self.results.append(measured)
        try:
            if limits.warmups:
                attach.mark("warmup")
                for _ in range(limits.warmups):
                    item.runtest()
            gc.collect()
            attach.mark("baseline")
            time.sleep(3 * self.interval_ms / 1000.0)
            attach.mark("load")
        except MeasureError as e:
            attach.kill()
            measured.error = str(e)
            raise pytest.fail.Exception("memrel: %s" % e, pytrace=False) from None
        except BaseException:
            attach.kill()
            measured.failed = True  # a warm-up call raised
            raise
        test_error = None
        try:
            result = yield
        except BaseException as e:
            test_error = e
            result = None
        try:
            attach.mark("unload")
            gc.collect()
            attach.mark("release")
            for step in limits.release:
                outcome = memrel._ACTIONS[step]([])
                measured.release_notes.append(outcome.text)
                if outcome.failed:
                    raise MeasureError("release step %s failed: %s" % (step, outcome.text))
            attach.mark("settle")
            time.sleep(self.settle_s)
            attach.mark("end")
            summary = attach.stop()
            measured.rows = rows_of(summary, limits)
        except MeasureError as e:
            attach.kill()
            measured.error = str(e)
            if test_error is None:
                raise pytest.fail.Exception("memrel: %s" % e, pytrace=False) from None
        if test_error is not None:
            # A skip or xfail inside the test is no failure to keep results for.
            measured.failed = not isinstance(test_error, (pytest.skip.Exception, pytest.xfail.Exception))
            raise test_error
        self._judge(measured)
        return result

    def _judge(self, measured):
        missing = [
            r.resource for r in measured.rows if r.limit_mib is not None and r.retained is None
        ]
        if measured.limits.max_vram_retained_mib is not None and not any(
            r.resource.startswith("cuda") for r in measured.rows
        ):
            missing.append("VRAM (no cuda resource in summary.json)")
        measured.over = any(r.over for r in measured.rows)
        if not measured.over and not missing:
            return
        measured.failed = True
        lines = []
        if measured.over:
            over = ", ".join(
                "%s retained %s MiB > %s MiB" % (r.resource, _mib(r.retained), _limit(r))
                for r in measured.rows
                if r.over
            )
            lines.append("memrel: memory did not go back after the test: %s" % over)
        if missing:
            lines.append(
                "memrel: no retained value for %s (not sampled at the phase edges); see %s"
                % (", ".join(missing), os.path.join(measured.dir, "attach.log"))
            )
        lines.append(table(measured.rows))
        if measured.release_notes:
            lines.append("release: %s" % "; ".join(measured.release_notes))
        lines.append("timeline: %s" % os.path.join(measured.dir, "timeline.png"))
        lines.append("results: %s" % measured.dir)
        raise pytest.fail.Exception("\n".join(lines), pytrace=False)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item, nextitem):
        # Setup failed after attach started (another plugin's setup hook), or
        # the call never ran: the measurement ends here.
        entry = self.attaches.pop(item.nodeid, None)
        if entry is not None:
            entry[0].kill()
        return (yield)

    def pytest_terminal_summary(self, terminalreporter):
        if not self.results:
            return
        tr = terminalreporter
        tr.write_sep("=", "memrel report")
        tests, rows = ["test"], []
        for m in self.results:
            if m.error is not None and not m.rows:
                tr.write_line("%s: not measured: %s" % (m.nodeid, m.error))
                continue
            for r in m.rows:
                tests.append(m.nodeid)
                rows.append(r)
        if rows:
            tr.write_line(table(rows, first=tests))
        keep = not self.temporary or any(m.failed or m.error for m in self.results)
        if keep:
            tr.write_line("results (timeline.png, summary.json per test): %s" % self.root)

    def pytest_unconfigure(self, config):
        for attach, _, _ in self.attaches.values():
            attach.kill()
        if self.temporary and not any(m.failed or m.error for m in self.results):
            shutil.rmtree(self.root, ignore_errors=True)
