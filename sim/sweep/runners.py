"""Run a sweep's cells on a local process pool (default) or a Dask cluster.

Both engines run :func:`sim.sweep.cells.run_cell_safe` on the workers and send back the
outcome; this process alone writes the store, so workers need no shared filesystem (only the
trace and cluster files a spec names).  At most one cell per worker slot is in flight, so a
killed sweep loses at most that many cells.  Results do not depend on the engine.

Dask is optional (``pip install clustersim[dask]``): ``dask="local"`` starts a LocalCluster of
``workers`` single-threaded worker processes; ``dask="tcp://HOST:PORT"`` uses an existing
scheduler, whose workers must have clustersim installed.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ConfigError
from .cells import CellOutcome, run_cell_safe
from .spec import Cell, SweepSpec
from .store import SweepStore

__all__ = ["run_sweep", "SweepReport", "SerialEngine", "PoolEngine", "DaskEngine", "make_engine",
           "check_dask_handshake", "die_with_parent"]


@dataclass
class SweepReport:
    name: str
    total: int
    skipped: int                 # finished before this run
    done: int = 0                # finished in this run
    failed: int = 0              # failed in this run
    wall_s: float = 0.0          # the whole run, engine start and stop included
    run_s: float = 0.0           # from the engine being ready to the last outcome
    engine: str = ""
    failures: list = field(default_factory=list)   # (label, error)

    def line(self) -> str:
        return (f"sweep {self.name}: {self.total} cells, {self.skipped} already done, "
                f"{self.done} done now, {self.failed} failed, {self.wall_s:.1f} s on {self.engine}")


# -- engines ---------------------------------------------------------------------------------

class SerialEngine:
    """Runs each cell in this process when submitted (debugging and tests)."""

    name = "this process"
    slots = 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, fn: Callable, cell: Cell):
        fut: cf.Future = cf.Future()
        fut.set_result(fn(cell))
        return fut

    def wait_some(self, futures) -> list:
        return list(futures)

    def outcome(self, fut, cell: Cell) -> CellOutcome:
        return fut.result()


def die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when its parent exits (prctl
    PR_SET_PDEATHSIG), so no worker outlives a killed sweep.  Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)    # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:                   # the parent died before prctl took effect
        os._exit(1)


def pool_worker_init() -> None:
    """Initializer of the pool's workers: die with the parent; leave Ctrl-C to the parent
    (which stops the pool), so workers print no KeyboardInterrupt tracebacks."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


class PoolEngine:
    """A local process pool (forkserver where available, else spawn)."""

    def __init__(self, workers: int | None = None):
        self.workers = max(1, int(workers or os.cpu_count() or 1))
        self.name = f"local pool ({self.workers} worker{'s' if self.workers > 1 else ''})"
        self._ex: cf.ProcessPoolExecutor | None = None

    def __enter__(self):
        self._start()
        return self

    def _start(self) -> None:
        methods = mp.get_all_start_methods()
        ctx = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
        if ctx.get_start_method() == "forkserver":
            ctx.set_forkserver_preload(["sim.sweep._forkserver"])
        self._ex = cf.ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=pool_worker_init)

    def __exit__(self, *exc):
        if self._ex is not None:
            if exc[0] is not None:              # interrupted or failed: stop the cells in flight
                for proc in list(getattr(self._ex, "_processes", {}).values()):
                    proc.terminate()
            self._ex.shutdown(wait=exc[0] is None, cancel_futures=True)
        return False

    @property
    def slots(self) -> int:
        return self.workers

    def submit(self, fn: Callable, cell: Cell):
        return self._ex.submit(fn, cell)

    def wait_some(self, futures) -> list:
        done, _ = cf.wait(list(futures), return_when=cf.FIRST_COMPLETED)
        return list(done)

    def outcome(self, fut, cell: Cell) -> CellOutcome:
        try:
            return fut.result()
        except cf.process.BrokenProcessPool as exc:
            # a worker died (killed, out of memory): record this cell; restart the pool once
            # (the other cells in flight on the broken pool fail the same way)
            if getattr(self._ex, "_broken", True):
                self._ex.shutdown(wait=False, cancel_futures=True)
                self._start()
            return CellOutcome(cell.id, cell.label, False, error=f"worker process died: {exc}")
        except Exception as exc:  # noqa: BLE001
            return CellOutcome(cell.id, cell.label, False, error=f"{type(exc).__name__}: {exc}")


class DaskEngine:
    """Dask distributed: an existing scheduler (``tcp://HOST:PORT``) or a LocalCluster."""

    def __init__(self, address: str, workers: int | None = None):
        try:
            import distributed  # noqa: F401  (only to fail early with a clear message)
        except ImportError:
            raise ConfigError("--dask needs Dask distributed: pip install 'clustersim[dask]'") from None
        self.address = address
        self.workers = workers
        self._cluster = None
        self._client = None
        self.name = ""

    def __enter__(self):
        from distributed import Client, LocalCluster

        if self.address == "local":
            n = max(1, int(self.workers or os.cpu_count() or 1))
            self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                         dashboard_address=None, silence_logs=40,
                                         preload=["sim.sweep._warm"])
            self._client = Client(self._cluster)
            self.name = f"dask LocalCluster ({n} worker{'s' if n > 1 else ''})"
        else:
            check_dask_handshake(self.address, HANDSHAKE_TIMEOUT_S)
            try:
                self._client = Client(self.address, timeout=f"{HANDSHAKE_TIMEOUT_S}s")
            except (OSError, TimeoutError) as exc:
                raise ConfigError(f"cannot reach the Dask scheduler at {self.address}: {exc}") from None
            self.name = f"dask {self.address}"
        return self

    def __exit__(self, *exc):
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        return False

    @property
    def slots(self) -> int:
        return max(1, sum(self._client.nthreads().values()))

    def submit(self, fn: Callable, cell: Cell):
        return self._client.submit(fn, cell, pure=False, key=f"cell-{cell.id}-{time.monotonic_ns()}")

    def wait_some(self, futures) -> list:
        from distributed import wait
        return list(wait(list(futures), return_when="FIRST_COMPLETED").done)

    def outcome(self, fut, cell: Cell) -> CellOutcome:
        try:
            out = fut.result()
        except Exception as exc:  # noqa: BLE001  (KilledWorker, lost connection, ...)
            out = CellOutcome(cell.id, cell.label, False, error=f"{type(exc).__name__}: {exc}")
        fut.release()
        return out


#: seconds to connect to a Dask scheduler and receive its handshake
HANDSHAKE_TIMEOUT_S = 20.0
_MAX_HANDSHAKE_BYTES = 1 << 20      # a Dask handshake is a few hundred bytes


def check_dask_handshake(address: str, timeout: float) -> None:
    """Connect to ``tcp://HOST:PORT`` and check that what answers sends a Dask comm handshake
    (a little-endian uint64 byte count of a small framed message) within ``timeout`` s.
    ConfigError otherwise: nothing there, an HTTP server (it waits for a request, so nothing
    comes), or a server that sends a banner (its first bytes read as an absurd size)."""
    import socket
    import struct
    from urllib.parse import urlsplit

    parts = urlsplit(address)
    if parts.scheme != "tcp":
        return                                  # tls:// etc.: left to distributed
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise ConfigError(f"--dask {address!r}: give tcp://HOST:PORT")
    where = f"the Dask scheduler at {address}"
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            head = _recv_exactly(sock, 8)
    except TimeoutError:
        raise ConfigError(f"{where} sent no Dask handshake within {timeout:g} s "
                          f"(is it a Dask scheduler port?)") from None
    except OSError as exc:
        raise ConfigError(f"cannot reach {where}: {exc.strerror or exc}") from None
    if len(head) < 8:
        raise ConfigError(f"{where} closed the connection without a Dask handshake")
    (size,) = struct.unpack("<Q", head)
    if not 8 <= size <= _MAX_HANDSHAKE_BYTES:
        raise ConfigError(f"{where} is not a Dask scheduler: it sent {head!r}, not a handshake")


def _recv_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        got = sock.recv(n - len(data))
        if not got:
            break
        data += got
    return data


def make_engine(workers: int | None = None, dask: str | None = None):
    if dask is None:
        return PoolEngine(workers)
    if dask != "local" and "://" not in dask:
        raise ConfigError(f"--dask {dask!r}: give tcp://HOST:PORT or 'local'")
    return DaskEngine(dask, workers)


# -- the loop --------------------------------------------------------------------------------

class _Progress:
    """tqdm bar on a terminal, else one line per finished cell."""

    def __init__(self, spec: SweepSpec, total: int, skipped: int, enabled: bool):
        self.enabled = enabled
        self.total = total
        self.n = skipped
        self.failed = 0
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=skipped, desc=spec.name, unit="cell",
                            dynamic_ncols=True)

    def update(self, outcome: CellOutcome | None, running: int) -> None:
        if outcome is not None:
            self.n += 1
            self.failed += not outcome.ok
        post = f"running={running} failed={self.failed}"
        if self.bar is not None:
            if outcome is not None:
                self.bar.update(1)
            self.bar.set_postfix_str(post)
        elif self.enabled and outcome is not None:
            state = "done" if outcome.ok else f"FAILED ({outcome.error})"
            print(f"[{self.n}/{self.total}] {outcome.label}: {state} in {outcome.wall_s:.1f} s; "
                  f"{post}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_sweep(spec: SweepSpec, out, *, workers: int | None = None, dask: str | None = None,
              progress: bool = False, cell_fn: Callable[[Cell], CellOutcome] = run_cell_safe,
              on_outcome: Callable[[Cell, CellOutcome], None] | None = None,
              engine=None) -> SweepReport:
    """Run the cells of ``spec`` not yet finished in ``out``; returns what happened.

    ``cell_fn`` must be a picklable module-level function (tests swap it);
    ``on_outcome`` is called after each outcome is stored.
    """
    store = SweepStore.open(out, spec)          # refuses another sweep's folder first
    finished = store.finished_ids()
    # biggest cells first (jobs x nodes): fewer idle workers at the end of the sweep
    todo = sorted((c for c in spec.cells if c.id not in finished),
                  key=lambda c: -(c.params["jobs"] or 0) * c.params["nodes"])
    report = SweepReport(spec.name, len(spec.cells), len(spec.cells) - len(todo))
    if not todo:
        report.engine = "nothing to run"
        return report
    engine = engine or make_engine(workers, dask)
    bar = _Progress(spec, len(spec.cells), report.skipped, progress)
    t0 = time.perf_counter()
    try:
        with engine:
            report.engine = engine.name
            t_ready = time.perf_counter()
            pending = list(reversed(todo))
            inflight: dict = {}

            def refill() -> None:
                while pending and len(inflight) < engine.slots:
                    cell = pending.pop()
                    inflight[engine.submit(cell_fn, cell)] = cell

            refill()
            bar.update(None, len(inflight))
            while inflight:
                finished = []
                for fut in engine.wait_some(inflight):
                    cell = inflight.pop(fut)
                    outcome = engine.outcome(fut, cell)
                    store.record(cell, outcome)
                    if outcome.ok:
                        report.done += 1
                    else:
                        report.failed += 1
                        report.failures.append((cell.label, outcome.error))
                    finished.append((cell, outcome))
                refill()
                for cell, outcome in finished:
                    bar.update(outcome, len(inflight))
                    if on_outcome is not None:
                        on_outcome(cell, outcome)
            report.run_s = time.perf_counter() - t_ready
    finally:
        bar.close()
        report.wall_s = time.perf_counter() - t0
    return report
