"""One warm-up per process: heavy imports and loads in one thread, in a fixed order.

Importing numpy (directly, or through onnxruntime, chromadb, httpx users) from two threads at
once prints NumPy's "bad install" banner or leaves modules "partially initialized". So every
heavy import and load in this process runs under one lock (`HEAVY`), and the server's warm-up
runs them in one background thread, in a fixed order, after a short delay (so a host's
`initialize` is answered first). Code that needs a loaded thing calls `Warmup.wait()` (or the
thing's own loader, which takes the same lock): it never imports on its own beside the warm-up.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)

# Held while anything heavy is imported or loaded, by whichever thread does it.
HEAVY = threading.RLock()

Step = tuple[str, Callable[[], object]]


def import_numpy() -> None:
    """numpy, with one BLAS thread: the search's matrix-vector product over ≤100k vectors takes a
    few ms on one core, while OpenBLAS's thread hand-offs beside onnxruntime's threads on a
    2-core machine cost ~8 ms a call (bench/search.py: p95 9.7 ms → 0.7 ms at 10k chunks)."""
    with HEAVY:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        import numpy  # noqa: F401


def import_imaging() -> None:
    """Pillow and its image-format plugins (~20-40 ms), which every image judge's first call met otherwise."""
    with HEAVY:
        from PIL import Image

        Image.init()


def freeze_heap() -> None:
    """The warm-up's last step: collect once, then move every object alive now (modules, models, the store)
    out of the collector's sight. Otherwise the next full collection walks the ~200k objects the heavy
    imports left (~0.3 s on this kind of machine), inside whichever request happens to trigger it."""
    import gc

    gc.collect()
    gc.freeze()


class Warmup:
    """Runs `steps` once, in order, each under `HEAVY`; a failed step is logged and met again on first use."""

    def __init__(self, steps: Sequence[Step]):
        self._steps = list(steps)
        self._done = threading.Event()
        self._started = False
        self._lock = threading.Lock()
        self.failures: dict[str, str] = {}
        self.step: tuple[int, str] | None = None  # (index, name) of the step running now
        self._passed = {name: threading.Event() for name, _ in self._steps}  # each set once its step has run

    @property
    def total(self) -> int:
        return len(self._steps)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._steps]

    def _run(self, delay_s: float) -> None:
        if delay_s:
            time.sleep(delay_s)
        begun = time.perf_counter()
        try:
            for index, (name, step) in enumerate(self._steps):
                self.step = (index, name)
                started = time.perf_counter()
                try:
                    with HEAVY:
                        step()
                except Exception as exc:
                    self.failures[name] = f"{type(exc).__name__}: {exc}"
                    log.warning("warm-up step %r failed: %s", name, exc)
                else:
                    log.debug("warm-up step %r took %.2f s", name, time.perf_counter() - started)
                self._passed[name].set()
        finally:
            self.step = None
            for passed in self._passed.values():
                passed.set()
            self._done.set()
            log.info("warm-up done in %.1f s", time.perf_counter() - begun)

    def start(self, delay_s: float = 0.0) -> threading.Thread | None:
        """Start the one warm-up thread (once); None when it already ran or runs."""
        with self._lock:
            if self._started:
                return None
            self._started = True
        thread = threading.Thread(target=self._run, args=(delay_s,), name="judge-mcp-warmup", daemon=True)
        thread.start()
        return thread

    def wait(self, timeout_s: float | None = None, until: str | None = None) -> bool:
        """Block until the warm-up has run (or, with `until`, that step and the ones before it); run it in this
        thread when nobody started it. True when done."""
        with self._lock:
            run_here = not self._started
            self._started = True
        if run_here:
            self._run(0.0)
        passed = self._passed.get(until) if until is not None else None
        return (passed or self._done).wait(timeout_s)

    def passed(self, until: str | None = None) -> bool:
        """Whether the warm-up has run (or, with `until`, that step and the ones before it)."""
        return (self._passed.get(until) or self._done).is_set() if until is not None else self._done.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()


def warm_in_background(name: str, load: Callable[[], object], delay_s: float = 0.0) -> threading.Thread:
    """Run `load` (under `HEAVY`) in a daemon thread after `delay_s`; a failure is logged."""
    warmup = Warmup([(name, load)])
    thread = warmup.start(delay_s)
    assert thread is not None
    return thread
