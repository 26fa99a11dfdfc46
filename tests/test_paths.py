"""Caller paths are resolved once and then used through directory fds: a swap after the check fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judges.code.gates import copy_tree
from judges.errors import InputError
from judges.inputs.paths import read_resolved, resolve_file


def test_a_directory_swapped_for_a_symlink_after_resolving_is_not_read_through(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("inside")
    outside.mkdir()
    (outside / "a.md").write_text("SECRET")
    real = resolve_file(str(root / "docs" / "a.md"), [root])
    os.rename(root / "docs", root / "parked")  # the swap, between the check and the read
    os.symlink(outside, root / "docs")
    with pytest.raises(InputError, match="changed while it was being used"):
        read_resolved(real, 1000, "path")


def test_the_sandbox_copy_holds_regular_files_only_and_never_follows_a_link(tmp_path: Path) -> None:
    src, outside, box = tmp_path / "src", tmp_path / "outside", tmp_path / "box"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("x = 1\n")
    os.chmod(src / "pkg" / "m.py", 0o750)
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    os.symlink(outside, src / "linkdir")
    os.symlink(outside / "secret.txt", src / "link.txt")
    copy_tree(src, box)
    assert sorted(p.relative_to(box).as_posix() for p in box.rglob("*")) == ["pkg", "pkg/m.py"]
    assert (box / "pkg" / "m.py").stat().st_mode & 0o777 == 0o750
