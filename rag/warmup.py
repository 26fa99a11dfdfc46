"""Loading heavy things in the background, after a delay, so a host's `initialize` is answered first."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def warm_in_background(name: str, load: Callable[[], object], delay_s: float = 0.0) -> threading.Thread:
    """Run `load` in a daemon thread after `delay_s`; a failure is logged, and met again on first real use."""

    def run() -> None:
        if delay_s:
            time.sleep(delay_s)
        try:
            load()
        except Exception as exc:
            log.warning("%s warm-up failed: %s", name, exc)

    thread = threading.Thread(target=run, name=f"{name}-warmup", daemon=True)
    thread.start()
    return thread
