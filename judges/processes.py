"""Whether a process on this machine is alive: the one check behind jobs' workers, uploads' owners and
an interrupted apply's temp files."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while process `pid` exists (this process always; one we may not signal counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by someone else
        return True
    return True
