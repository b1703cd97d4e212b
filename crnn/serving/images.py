"""Image bytes from a request -> a decoded PIL image, within the service's limits (bytes, pixels).

Decoding follows :func:`crnn.infer.load_image` (full decode, EXIF orientation applied) so that the service reads a
file exactly as ``crnn-predict`` and ``crnn.Recognizer`` do; the pixel count is checked from the header, before
anything is decompressed, so a decompression bomb costs nothing.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

from crnn.infer import EMPTY_IMAGE, UNRECOGNISED_IMAGE
from crnn.serving.errors import RequestError

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one request may hold."""

    max_images: int = 64  # images per request
    max_image_bytes: int = 8 * MIB  # encoded bytes of one image
    max_pixels: int = 25_000_000  # width x height of one decoded image (decompression bombs)
    max_request_bytes: int = 32 * MIB  # the whole body (multipart or JSON)
    max_lexicon_words: int = 100_000


def _size(n: int) -> str:
    """Bytes in words: 8 MiB, 300 KiB, 12 bytes."""
    if n >= MIB:
        return f"{n / MIB:g} MiB"
    return f"{n / 1024:g} KiB" if n >= 1024 else f"{n} bytes"


def header_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG or GIF header (PIL refuses to open a 0x0 one and only says it is unrecognised)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    return None


def _check_size(w: int, h: int, where: str, limits: Limits) -> None:
    """400 for an image without pixels, 413 for one over --max-pixels."""
    if w * h > limits.max_pixels:
        raise RequestError(413, f"{where}: {w}x{h} = {w * h / 1e6:.1f} Mpx, over the limit of "
                                f"{limits.max_pixels / 1e6:g} Mpx (crnn-serve --max-pixels)")
    if w == 0 or h == 0:
        raise RequestError(400, f"{where}: the image is {w}x{h}: it has no pixels")


def open_image(data: bytes, where: str, limits: Limits) -> Image.Image:
    """Decode ``data`` (any format PIL reads) or raise RequestError (400/413) naming ``where`` and the problem."""
    if len(data) > limits.max_image_bytes:
        raise RequestError(413, f"{where}: {_size(len(data))}, over the limit of {_size(limits.max_image_bytes)} "
                                f"per image (crnn-serve --max-image-bytes)")
    if not data:
        raise RequestError(400, f"{where}: {EMPTY_IMAGE}; send the image file's bytes")
    size = header_size(data)
    if size is not None:
        _check_size(*size, where, limits)
    try:
        with Image.open(io.BytesIO(data)) as img:
            _check_size(*img.size, where, limits)
            img.load()
            return ImageOps.exif_transpose(img)  # a decoded copy, rotated when the EXIF says so
    except RequestError:
        raise
    except Image.DecompressionBombError:  # PIL's own guard, far above ours: refused before we saw the size
        raise RequestError(413, f"{where}: over the limit of {limits.max_pixels / 1e6:g} Mpx "
                                f"(crnn-serve --max-pixels); PIL calls it a possible decompression bomb") from None
    except UnidentifiedImageError:
        raise RequestError(400, f"{where}: {UNRECOGNISED_IMAGE}") from None
    except Exception as e:  # truncated, corrupt, unsupported mode...: the client's file, never a server error
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RequestError(400, f"{where}: cannot decode image ({reason})") from None
