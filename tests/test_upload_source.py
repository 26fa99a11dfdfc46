"""read_source: an upload's size is checked against the limit in decoded bytes, padding included."""

from __future__ import annotations

import base64

import pytest

from judges.errors import InputError
from judges.store.guidelines import read_source


@pytest.mark.parametrize("size", [10, 11, 12])  # two, one and no '=' of padding
def test_base64_content_of_exactly_the_limit_is_accepted(size: int) -> None:
    payload = base64.b64encode(b"x" * size).decode()
    data, name = read_source(path=None, content_base64=payload, text=None, filename=None,
                             allowed_roots=[], max_bytes=size)
    assert (len(data), name) == (size, "upload")


@pytest.mark.parametrize("size", [10, 11, 12])
def test_base64_content_one_byte_over_the_limit_is_refused(size: int) -> None:
    payload = base64.b64encode(b"x" * (size + 1)).decode()
    with pytest.raises(InputError, match=f"content_base64 decodes to more than the {size} bytes allowed"):
        read_source(path=None, content_base64=payload, text=None, filename=None, allowed_roots=[], max_bytes=size)


def test_a_filename_of_255_characters_is_accepted() -> None:
    _, name = read_source(path=None, content_base64=None, text="Keep margins wide.", filename="f" * 252 + ".md",
                          allowed_roots=[], max_bytes=100)
    assert len(name) == 255
