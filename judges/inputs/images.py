"""Images for judges: a file path (inside the allowed roots), a data: URI, raw base64, or (when
enabled) an http(s) URL to a public address. Recognised by magic bytes; large ones downscaled."""

from __future__ import annotations

import base64
import binascii
import http.client
import io
import ipaddress
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from judges.errors import InputError
from judges.inputs.paths import read_resolved, resolve_file
from judges.models.protocol import ImagePart

MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True)
class ImagePolicy:
    allowed_roots: Sequence[Path]
    max_bytes: int = 20 * 1024 * 1024
    max_side: int = 2048
    max_pixels: int = 40_000_000
    allow_urls: bool = False
    url_timeout_s: float = 15.0


def media_type(data: bytes) -> str | None:
    for magic, kind in MAGIC:
        if data.startswith(magic):
            return kind
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _decode_base64(text: str) -> bytes | None:
    compact = "".join(text.split())
    if not compact or len(compact) % 4:
        return None
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None


MAX_FETCHES = 4  # image downloads in flight at once, all callers together
_fetching = threading.BoundedSemaphore(MAX_FETCHES)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A global unicast address, and so is any IPv4 address an IPv6 one carries (mapped, 6to4, Teredo, NAT64)."""
    if not ip.is_global or ip.is_multicast:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        inner = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ()),
                 ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None]
        return all(_public(v4) for v4 in inner if v4 is not None)
    return True


def _public_address(host: str, port: int) -> str:
    """The address to connect to for `host`, resolved ONCE: every address it resolves to must be public, and the
    connection goes to the one checked here (a second lookup could answer 127.0.0.1: DNS rebinding)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise InputError(f"cannot resolve {host!r}: {exc}") from None
    addresses = [str(info[4][0]) for info in infos]
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if not _public(ip):
            raise InputError(f"image URLs must point to public addresses; {host} resolves to {ip}")
    if not addresses:
        raise InputError(f"cannot resolve {host!r}")
    return addresses[0]


def _connection(scheme: str, host: str, port: int, address: str, timeout: float) -> http.client.HTTPConnection:
    """An HTTP(S) connection to `address` (already checked), speaking to `host` (Host header, TLS name)."""
    if scheme == "http":
        class Pinned(http.client.HTTPConnection):
            def connect(self) -> None:
                self.sock = socket.create_connection((address, port), self.timeout)
        return Pinned(host, port, timeout=timeout)
    import ssl

    context = ssl.create_default_context()

    class PinnedTLS(http.client.HTTPSConnection):
        def connect(self) -> None:
            sock = socket.create_connection((address, port), self.timeout)
            self.sock = context.wrap_socket(sock, server_hostname=host)
    return PinnedTLS(host, port, timeout=timeout, context=context)


def _fetch(url: str, policy: ImagePolicy) -> bytes:
    """GET an image URL (operator-enabled): public addresses only, pinned to the address checked, redirects
    checked again, at most `max_bytes`, the whole download within `url_timeout_s`, and at most MAX_FETCHES at once
    (a slow server cannot hold more of the server's worker threads than that)."""
    if not _fetching.acquire(blocking=False):
        raise InputError(f"{MAX_FETCHES} image downloads are already in progress; try again shortly, or pass the "
                         "image as a data: URI or base64")
    try:
        return _download(url, policy, time.monotonic() + policy.url_timeout_s)
    finally:
        _fetching.release()


def _download(url: str, policy: ImagePolicy, deadline: float) -> bytes:
    for _ in range(4):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"only http(s) image URLs are accepted (got {url[:80]!r})")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise InputError(f"the image URL's port is not a number (got {url[:80]!r})") from None
        address = _public_address(parts.hostname, port)
        left = deadline - time.monotonic()
        if left <= 0:
            break
        conn = _connection(parts.scheme, parts.hostname, port, address, left)
        try:
            conn.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                         headers={"User-Agent": "judge-mcp", "Accept": "image/*"})
            resp = conn.getresponse()
            if resp.status in (301, 302, 303, 307, 308) and resp.getheader("location"):
                url = urllib.parse.urljoin(url, resp.getheader("location") or "")
                continue
            if resp.status != 200:
                raise InputError(f"fetching the image failed: HTTP {resp.status}")
            data = bytearray()
            while len(data) <= policy.max_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise InputError(f"fetching the image took longer than {policy.url_timeout_s:g} s")
                if conn.sock is not None:
                    conn.sock.settimeout(left)
                chunk = resp.read1(min(65536, policy.max_bytes + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
            return bytes(data)
        except (OSError, http.client.HTTPException) as exc:
            raise InputError(f"fetching the image failed: {exc}") from None
        finally:
            conn.close()
    raise InputError("too many redirects, or no time left, fetching the image")


def _image_base64(ref: str) -> bytes | None:
    """The bytes of `ref` when it is raw base64 of a recognised image (a path never decodes to one)."""
    decoded = _decode_base64(ref) if len(ref) > 64 else None
    return decoded if decoded is not None and media_type(decoded) else None


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif")


def looks_like_path(ref: str) -> bool:
    """True when `ref` is written as a file path: one line starting with / ~ ./ ../ or ending in an
    image suffix. Decided by its spelling alone, never by whether such a file exists."""
    ref = ref.strip()
    if not ref or len(ref) >= 4096 or "\n" in ref:
        return False
    return ref.startswith(("/", "~", "./", "../")) or ref.lower().endswith(IMAGE_SUFFIXES)


def is_image_reference(ref: str) -> bool:
    """True when `ref` names an image: a data: URI, image base64, or something written as a path.

    Existence is not consulted (that would tell a caller which files exist outside the roots): a
    path-like reference is loaded, so outside the roots it gets the one refusal, inside but
    missing it is "no such file"."""
    ref = ref.strip()
    return ref.startswith("data:") or _image_base64(ref) is not None or looks_like_path(ref)


def read_image_bytes(ref: str, policy: ImagePolicy) -> bytes:
    ref = ref.strip()
    if ref.startswith("data:"):
        header, sep, payload = ref.partition(",")
        if not sep or ";base64" not in header:
            raise InputError("a data: URI must be base64, e.g. data:image/png;base64,...")
        data = _decode_base64(payload)
        if data is None:
            raise InputError("the data: URI's payload is not valid base64")
        return data
    if ref.startswith(("http://", "https://")):
        if not policy.allow_urls:
            raise InputError("image URLs are off; pass a file path, a data: URI or base64, "
                             "or set JUDGE_MCP_ALLOW_IMAGE_URLS=true")
        return _fetch(ref, policy)
    decoded = _image_base64(ref)
    if decoded is not None:
        return decoded
    if len(ref) > 4096:
        raise InputError("the image is neither valid base64 nor a file path")
    if not looks_like_path(ref) and (len(ref) >= 16 or ref.endswith("=")):
        # Not written as a path (no /, ~, ./, ../ or image suffix): base64 that went wrong, not a file name.
        if _decode_base64(ref) is not None:
            raise InputError("the base64 decodes to something that is not a PNG, JPEG, WebP or GIF image; "
                             "send the image file's bytes in base64, e.g. data:image/png;base64,iVBORw0KGgo...")
        if re.fullmatch(r"[A-Za-z0-9+/=_\-\s]+", ref):
            raise InputError("the image is not valid base64 (cut short or altered?); send the whole file's base64, "
                             "e.g. data:image/png;base64,iVBORw0KGgo..., or a file path")
    path = resolve_file(ref, policy.allowed_roots)
    if path.stat().st_size > policy.max_bytes:
        raise InputError(f"{ref} is {path.stat().st_size} bytes, more than {policy.max_bytes} (JUDGE_MCP_MAX_IMAGE_BYTES)")
    return read_resolved(path, policy.max_bytes, ref)


def load_image(ref: str, policy: ImagePolicy) -> ImagePart:
    """An ImagePart from any accepted reference; InputError says what was wrong."""
    data = read_image_bytes(ref, policy)
    if len(data) > policy.max_bytes:
        raise InputError(f"the image is {len(data)} bytes, more than {policy.max_bytes} (JUDGE_MCP_MAX_IMAGE_BYTES)")
    kind = media_type(data)
    if kind is None:
        raise InputError("not an image: only PNG, JPEG, WebP and GIF are accepted (checked by content)")
    return ImagePart.from_bytes(*downscale(data, kind, policy.max_side, policy.max_pixels))


async def load_image_async(ref: str, policy: ImagePolicy) -> ImagePart:
    """load_image in a worker thread: decoding and resizing never block the event loop."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(load_image, ref, policy)


def downscale(data: bytes, kind: str, max_side: int, max_pixels: int = 40_000_000) -> tuple[bytes, str]:
    """The image with its longer side at most `max_side`, aspect ratio kept (else unchanged).

    The size is read from the header first: an image above `max_pixels` is refused before decoding."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:  # reads the header only
            width, height = img.size
            if width * height > max_pixels:
                raise InputError(
                    f"the image is {width}×{height} ({width * height / 1e6:.1f} megapixels), more than the "
                    f"{max_pixels / 1e6:g} megapixels allowed (JUDGE_MCP_MAX_IMAGE_PIXELS); send a smaller image")
            if max(width, height) <= max_side:
                return data, kind
            scale = max_side / max(width, height)
            img.seek(0)
            small = img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB").resize(
                (max(1, round(width * scale)), max(1, round(height * scale))), Image.Resampling.LANCZOS
            )
    except (OSError, Image.DecompressionBombError) as exc:
        raise InputError(f"the image cannot be decoded: {exc}") from None
    out = io.BytesIO()
    if kind == "image/jpeg":
        small.convert("RGB").save(out, "JPEG", quality=90)
        return out.getvalue(), "image/jpeg"
    small.save(out, "PNG")
    return out.getvalue(), "image/png"
