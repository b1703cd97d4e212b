"""The HTTP application: FastAPI routes (OpenAPI page at /docs) inside three small ASGI layers.

Outermost first: metrics (every answer counted by endpoint and status, with its latency), the bearer token (checked
from the headers alone: a request without it gets 401 and its body is never read), and the body limit (a declared
or streamed body over --max-request-bytes gets 413). Every refusal is JSON ``{"error": "<one line>"}``.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import time
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import crnn
from crnn.serving import payload
from crnn.serving.errors import RequestError
from crnn.serving.service import Service

log = logging.getLogger("crnn.serving")
OPEN_PATHS = ("/", "/healthz", "/readyz", "/docs", "/openapi.json", "/favicon.ico")  # no token needed

READ_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {"schema": {"type": "object", "required": ["image"], "properties": {
            "image": {"type": "array", "items": {"type": "string", "format": "binary"},
                      "description": "one field per image file, in the order the readings come back"},
            "model": {"type": "string", "description": "a name from GET /v1/models (default: the first)"},
            "decoder": {"type": "string", "enum": ["greedy", "beam", "word"],
                        "description": "default greedy (beam with a lexicon); word: a word prior, where crnn-serve "
                                       "was started with --words FILE"},
            "beam_width": {"type": "integer", "minimum": 1, "maximum": payload.MAX_BEAM_WIDTH, "default": 10},
            "lexicon": {"type": "string", "description": "one word per line: answer the most likely word"},
            "characters": {"type": "boolean", "description": "add per-character confidences"},
            "vertical": {"type": "string", "enum": ["warn", "stack", "rotate", "auto", "off"], "default": "warn",
                         "description": "crops at least twice as tall as wide: read as they are with a warning, "
                                        "stack their characters side by side (top first), turn them a quarter "
                                        "each way, try all of those (auto), or read as they are (off)"}}}},
        "application/json": {"schema": {"type": "object", "required": ["images"], "properties": {
            "images": {"type": "array", "items": {"type": "string", "format": "byte"},
                       "description": "base64 image files"},
            "model": {"type": "string"}, "decoder": {"type": "string", "enum": ["greedy", "beam", "word"]},
            "beam_width": {"type": "integer"}, "lexicon": {"type": "array", "items": {"type": "string"}},
            "characters": {"type": "boolean"}, "vertical": {"type": "string",
                                                            "enum": ["warn", "stack", "rotate", "auto", "off"]}}}},
    },
}
READ_ANSWER = {"200": {"description": "one reading per image, in input order", "content": {"application/json": {
    "example": {"model": "en", "readings": [{"text": "hello", "confidence": 0.97}]}}}}}
for code, what in ((400, "bad input"), (401, "token missing or wrong"), (413, "over a limit"),
                   (415, "not multipart or JSON"), (503, "queue full (Retry-After)"), (504, "timed out")):
    READ_ANSWER[str(code)] = {"description": what, "content": {"application/json": {
        "example": {"error": "one line naming the problem"}}}}


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON body of every refusal."""
    return JSONResponse({"error": " ".join(str(message).split())}, status, headers=headers)


def build_app(svc: Service) -> ASGIApp:
    """The ASGI application of a loaded service."""
    app = FastAPI(title="crnn-serve", version=crnn.__version__, lifespan=svc.lifespan,
                  description="Reads the text in word and line crops with CRNN models. Send images to "
                              "POST /v1/read; the page at / does it from a browser.")
    add_routes(app, svc)
    add_error_handlers(app)
    app.state.service = svc
    asgi: ASGIApp = BodyLimit(app, svc.opts.limits.max_request_bytes)
    if svc.opts.token:
        asgi = BearerToken(asgi, svc.opts.token)
    return MetricsLayer(asgi, svc)


def add_routes(app: FastAPI, svc: Service) -> None:
    """The endpoints."""

    @app.post("/v1/read", summary="Read the text in one or more images", openapi_extra={"requestBody": READ_BODY},
              responses=READ_ANSWER)
    async def read(request: Request) -> Response:
        if svc.draining:
            raise svc.busy_error("the server is shutting down; send the request to another instance")
        if svc.full():
            raise svc.busy_error("every model's queue is full; retry later")
        req = await payload.parse(request, svc.opts.limits)
        slot = svc.slot(req.model)
        opts = await asyncio.get_running_loop().run_in_executor(svc.decoding, payload.read_options, req, slot,
                                                                 svc.opts.limits)
        readings = await svc.read(slot, req.images, opts)
        return JSONResponse({"model": slot.name, "readings": readings})

    @app.get("/v1/models", summary="The models this server holds, and its limits")
    async def models() -> Response:
        lim = svc.opts.limits
        return JSONResponse({"default": svc.default_model, "models": [s.describe() for s in svc.models.values()],
                             "limits": {"max_images": lim.max_images, "max_image_bytes": lim.max_image_bytes,
                                        "max_pixels": lim.max_pixels, "max_request_bytes": lim.max_request_bytes,
                                        "max_batch": svc.opts.max_batch, "max_wait_ms": svc.opts.max_wait_ms,
                                        "max_queue": svc.opts.max_queue, "timeout_s": svc.opts.timeout_s}})

    @app.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> Response:
        return JSONResponse({"status": "ok"})

    @app.get("/readyz", summary="Readiness: models loaded and warm, not shutting down, room in the queue")
    async def readyz() -> Response:
        status = ("shutting down" if svc.draining else "starting" if not svc.ready
                  else "queue full" if svc.full() else "ready")
        queued = {name: b.queued for name, b in svc.batchers.items()}
        return JSONResponse({"status": status, "queued": queued}, 200 if status == "ready" else 503)

    @app.get("/metrics", summary="Prometheus metrics (text format)")
    async def metrics() -> Response:
        return Response(svc.metrics.render(), media_type=svc.metrics.content_type)

    page = resources.files("crnn.serving").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", summary="A page to drop images on and see the readings", include_in_schema=False)
    async def index() -> Response:
        return HTMLResponse(page)


def add_error_handlers(app: FastAPI) -> None:
    """Every error as JSON {"error": one line}: ours, the framework's (404, 405), and anything unexpected (500)."""

    @app.exception_handler(RequestError)
    async def refused(request: Request, exc: RequestError) -> Response:
        return error_response(exc.status, exc.message, exc.headers)

    @app.exception_handler(HTTPException)
    async def framework(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            msg = f"no such endpoint: {request.method} {request.url.path}; see /docs"
        elif exc.status_code == 405:
            msg = f"{request.method} is not allowed on {request.url.path}; see /docs"
        else:
            msg = str(exc.detail)
        return error_response(exc.status_code, msg, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        return error_response(400, f"{'.'.join(map(str, first.get('loc', ())))}: {first.get('msg', 'invalid')}")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error ({type(exc).__name__}: {exc}); the server keeps running")


class BodyLimit:
    """413 for a body over ``limit`` bytes: declared (Content-Length, before reading) or streamed (while reading)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        too_big = RequestError(413, f"the request body is over the limit of {self.limit / 1048576:g} MiB "
                                    "(crnn-serve --max-request-bytes); send fewer or smaller images")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await error_response(too_big.status, too_big.message)(scope, receive, send)
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise too_big
            return message
        await self.app(scope, counted, send)


class BearerToken:
    """401 unless ``Authorization: Bearer <token>``, on every path but the page, health and the API docs."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token):
                why = "wrong bearer token" if given else "this server needs a bearer token"
                return await error_response(401, f"{why}: send the header 'Authorization: Bearer TOKEN'",
                                            {"WWW-Authenticate": "Bearer"})(scope, receive, send)
        await self.app(scope, receive, send)


class MetricsLayer:
    """Counts every HTTP answer by endpoint and status and times it; tracks requests in flight."""

    def __init__(self, app: ASGIApp, svc: Service) -> None:
        self.app, self.metrics = app, svc.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
        reading = scope["path"] == "/v1/read"
        self.metrics.in_flight.inc()
        self.metrics.active += reading
        try:
            await self.app(scope, receive, sent)
        finally:
            self.metrics.active -= reading
            self.metrics.in_flight.dec()
            self.metrics.observe_request(scope["path"], status, time.perf_counter() - start)
