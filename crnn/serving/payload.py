"""POST /v1/read bodies -> the images and the read options, or a RequestError naming what is wrong.

Two shapes: multipart/form-data with one file field ``image`` per image (repeatable) and optional text fields, or
JSON ``{"images": ["<base64>", ...], ...}``. The options are the same in both: ``model``, ``decoder`` (greedy | beam, or
word where crnn-serve was given a word list with --words), ``beam_width``, ``lexicon`` (JSON: a list of words; form: one
word per line), ``characters`` (per-character confidences) and ``vertical`` (crops at least twice as tall as wide: warn,
stack or off, as crnn-predict --vertical).
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request

from crnn.data.vertical import VERTICAL_MODES
from crnn.decode import DECODE_METHODS
from crnn.serving.errors import RequestError
from crnn.serving.images import Limits
from crnn.serving.models import ModelSlot, ReadOptions

OPTION_KEYS = ("model", "decoder", "beam_width", "lexicon", "characters", "vertical")
MAX_BEAM_WIDTH = 100
HOW = "send multipart form fields named 'image' (curl -F image=@word.png) or JSON {\"images\": [\"<base64>\", ...]}"


@dataclass
class ReadRequest:
    """What one POST /v1/read asks for, before the options are checked against a model."""

    images: list[tuple[str, bytes]]  # (how the image is named in errors, its bytes), in input order
    model: str | None = None
    decoder: str | None = None
    beam_width: object = 10
    lexicon: list[str] | None = None
    characters: object = False
    vertical: object = "warn"


async def parse(request: Request, limits: Limits) -> ReadRequest:
    """The images and options of a POST /v1/read body (multipart or JSON)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "multipart/form-data":
        return await _multipart(request, limits)
    if ctype == "application/json":
        return _json(await request.body(), limits)
    raise RequestError(415, f"content type {ctype or 'missing'!r}: {HOW}")


def _count(n: int, limits: Limits) -> None:
    if n == 0:
        raise RequestError(400, f"no image in the request: {HOW}")
    if n > limits.max_images:
        raise RequestError(413, f"{n} images, over the limit of {limits.max_images} per request "
                                "(crnn-serve --max-images); send them in several requests")


async def _multipart(request: Request, limits: Limits) -> ReadRequest:
    try:
        form = await request.form(max_files=limits.max_images + 1, max_fields=len(OPTION_KEYS) + limits.max_images + 1,
                                  max_part_size=limits.max_request_bytes)
    except RequestError:
        raise
    except HTTPException as e:  # starlette's own checks (too many files or fields, a broken body)
        if "files" in str(e.detail):
            raise RequestError(413, f"more than {limits.max_images + 1} images, over the limit of {limits.max_images} "
                                    "per request (crnn-serve --max-images); send them in several requests") from None
        raise RequestError(400, f"bad multipart body ({e.detail}); {HOW}") from None
    except Exception as e:  # noqa: BLE001 - whatever the parser makes of a malformed body is the client's
        raise RequestError(400, f"bad multipart body ({type(e).__name__}: {e}); {HOW}") from None
    try:
        images, options = [], {}
        for key, value in form.multi_items():
            if key == "image":
                if not isinstance(value, UploadFile):
                    raise RequestError(400, "field 'image' holds text, not a file: send the file itself "
                                            "(curl -F image=@word.png, not -F image=word.png)")
                images.append(value)
            elif key in OPTION_KEYS:
                if isinstance(value, UploadFile):
                    value = (await value.read()).decode("utf-8", "replace")
                options[key] = value
            else:
                raise RequestError(400, f"unknown form field {key!r}; images go in fields named 'image', options "
                                        f"are {', '.join(OPTION_KEYS)}")
        _count(len(images), limits)
        named = [(f"image {i}" + (f" ({f.filename})" if f.filename else ""), await f.read())
                 for i, f in enumerate(images)]
    finally:
        await form.close()
    if "lexicon" in options:
        options["lexicon"] = options["lexicon"].splitlines()
    if "characters" in options:
        options["characters"] = _flag(options["characters"])
    return ReadRequest(named, **options)


def _flag(text: str) -> object:
    """A form field's true/false ("true", "1", "yes" / "false", "0", "no"); anything else is left to be refused."""
    low = text.strip().lower()
    return True if low in ("true", "1", "yes", "on") else False if low in ("false", "0", "no", "off", "") else text


def _json(body: bytes, limits: Limits) -> ReadRequest:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestError(400, f"the body is not valid JSON ({e}); {HOW}") from None
    if not isinstance(data, dict):
        raise RequestError(400, f"the JSON body must be an object, got {type(data).__name__}; {HOW}")
    unknown = [k for k in data if k != "images" and k not in OPTION_KEYS]
    if unknown:
        raise RequestError(400, f"unknown key {unknown[0]!r}; the keys are images, {', '.join(OPTION_KEYS)}")
    images = data.get("images")
    if images is None:
        raise RequestError(400, f"no 'images' key: {HOW}")
    if not isinstance(images, list) or not all(isinstance(s, str) for s in images):
        raise RequestError(400, "'images' must be a list of base64 strings (one per image file)")
    _count(len(images), limits)
    lexicon = data.get("lexicon")
    if lexicon is not None and (not isinstance(lexicon, list) or not all(isinstance(w, str) for w in lexicon)):
        raise RequestError(400, "'lexicon' must be a list of words (strings)")
    named = [(f"images[{i}]", _b64(s, f"images[{i}]", limits)) for i, s in enumerate(images)]
    return ReadRequest(named, **{k: data[k] for k in OPTION_KEYS if k in data})


def _b64(text: str, where: str, limits: Limits) -> bytes:
    """Standard base64 (a ``data:...;base64,`` prefix and line breaks allowed) -> bytes."""
    if text.startswith("data:") and "," in text[:200]:
        text = text.split(",", 1)[1]
    text = "".join(text.split())
    if len(text) > limits.max_image_bytes * 4 // 3 + 4:
        n = len(text) * 3 // 4
        raise RequestError(413, f"{where}: about {n / 1048576:.1f} MiB, over the limit of "
                                f"{limits.max_image_bytes / 1048576:g} MiB per image (crnn-serve --max-image-bytes)")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise RequestError(400, f"{where}: not valid base64 ({e})") from None


def read_options(req: ReadRequest, slot: ModelSlot, limits: Limits) -> ReadOptions:
    """Check a request's options against its model (a decoding thread: a long lexicon takes a moment)."""
    decoder = req.decoder if req.decoder is not None else ("beam" if req.lexicon is not None else "greedy")
    if decoder not in DECODE_METHODS:
        raise RequestError(400, f"decoder must be greedy or beam (or word, with crnn-serve --words), got {decoder!r}")
    if decoder == "word" and slot.words is None:
        raise RequestError(400, "the word decoder needs a word list, and this service has none: start crnn-serve "
                                "with --words FILE, or use decoder greedy or beam")
    try:
        beam_width = int(req.beam_width)  # type: ignore[call-overload]
        if isinstance(req.beam_width, (bool, float)) or not 1 <= beam_width <= MAX_BEAM_WIDTH:
            raise ValueError
    except (TypeError, ValueError):
        raise RequestError(400, f"beam_width must be a whole number from 1 to {MAX_BEAM_WIDTH}, "
                                f"got {req.beam_width!r}") from None
    if not isinstance(req.characters, bool):
        raise RequestError(400, f"characters must be true or false, got {req.characters!r}")
    if req.vertical not in VERTICAL_MODES:
        raise RequestError(400, f"vertical must be one of {', '.join(VERTICAL_MODES)} (crops at least twice as tall "
                                f"as wide), got {req.vertical!r}")
    lexicon = None
    if req.lexicon is not None:
        words = [w.strip() for w in req.lexicon if w.strip()]
        if decoder != "beam":
            raise RequestError(400, "a lexicon needs the beam decoder; leave decoder out or set it to beam")
        if not words:
            raise RequestError(400, "the lexicon holds no words; give one word per line (form) or a list (JSON)")
        if len(words) > limits.max_lexicon_words:
            raise RequestError(413, f"the lexicon has {len(words)} words, over the limit of "
                                    f"{limits.max_lexicon_words} (crnn-serve --max-lexicon-words)")
        lexicon = slot.lexicon(words)
        if not len(lexicon):
            raise RequestError(400, f"none of the lexicon's {len(words)} words can be spelled with the alphabet of "
                                    f"model {slot.name!r}")
    return ReadOptions(decoder, beam_width, lexicon, req.characters, str(req.vertical))
