"""A test hook loaded into a spawned `judge-mcp` (this folder on its PYTHONPATH): it counts the file steps of
apply_patch (every open, link and rename of a judge-mcp temp file or journal, and the unlink, mkdir, rmdir
and fsync calls after it) in the thread that creates the first journal (an apply's, not the recovery's) and kills its own process with SIGKILL just before step
CRASH_HOOK_KILL_AT. CRASH_HOOK_LOG names a file that gets one line per step; CRASH_HOOK_DELAY_S slows each
step (so an outside kill lands mid-apply). Only tests/test_patch_crash.py sets these."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from typing import Any

_KILL_AT = int(os.environ.get("CRASH_HOOK_KILL_AT", "0") or 0)
_DELAY = float(os.environ.get("CRASH_HOOK_DELAY_S", "0") or 0)
_LOG = os.environ.get("CRASH_HOOK_LOG")
_OURS = re.compile(r"(^\..*\.judge-mcp\.(tmp|old|del)$)|(^\.judge-mcp-apply\..*\.journal$)")

if _KILL_AT or _DELAY or _LOG:
    _state: dict[str, Any] = {"n": 0, "armed": None}  # armed: the thread of the first step (the apply's)
    _log = open(_LOG, "a", buffering=1) if _LOG else None

    def _ours(args: tuple[Any, ...]) -> str | None:
        for a in args:
            if isinstance(a, str) and _OURS.match(os.path.basename(a)):
                return os.path.basename(a)
        return None

    def _wrap(fn: Any, always: bool) -> Any:
        def step(*args: Any, **kwargs: Any) -> Any:
            name = _ours(args)
            creates_journal = (fn is _open and name is not None and name.endswith(".journal")
                               and len(args) > 1 and args[1] & os.O_CREAT)
            if creates_journal and _state["armed"] is None:
                _state["armed"] = threading.get_ident()
            if _state["armed"] == threading.get_ident() and (name is not None or always):
                _state["n"] += 1
                if _log is not None:
                    _log.write(f"{_state['n']} {fn.__name__} {name or args[0]}\n")
                if _state["n"] == _KILL_AT:
                    os.kill(os.getpid(), signal.SIGKILL)
                if _DELAY:
                    time.sleep(_DELAY)
            return fn(*args, **kwargs)

        return step

    _open = os.open
    for _name in ("open", "link", "replace"):
        setattr(os, _name, _wrap(getattr(os, _name), False))
    for _name in ("unlink", "mkdir", "rmdir", "fsync"):
        setattr(os, _name, _wrap(getattr(os, _name), True))
