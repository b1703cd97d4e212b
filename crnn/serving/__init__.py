"""crnn-serve: an HTTP recognition service (FastAPI on uvicorn) for one or more CRNN models by name.

    from crnn.serving import ServeOptions, run
    run(ServeOptions(weights=["en", "zh=runs/zh/best.pt"], port=8000))   # blocks; SIGTERM drains, then returns 0

or ``crnn.serve(...)`` / the ``crnn-serve`` command. Endpoints: POST /v1/read, GET /v1/models, /healthz, /readyz,
/metrics (Prometheus), the page at / and the OpenAPI page at /docs. Readings equal ``crnn.Recognizer``'s and
``crnn-predict``'s for the same image files. Needs the ``serve`` extra (``pip install -e ".[serve]"``).
"""
from crnn.serving.errors import RequestError, ServeError
from crnn.serving.images import Limits
from crnn.serving.service import TOKEN_ENV, ServeOptions, Service, default_threads

__all__ = ["ServeOptions", "Limits", "Service", "RequestError", "ServeError", "TOKEN_ENV", "default_threads", "run",
           "build_app"]


def run(opts: ServeOptions) -> int:
    """Load the models and serve until SIGTERM (returns 0) or Ctrl-C (130); see crnn.serving.server."""
    from crnn.serving.server import run as _run

    return _run(opts)


def build_app(svc: Service):
    """The ASGI application of a loaded :class:`Service` (to run under another ASGI server)."""
    from crnn.serving.app import build_app as _build

    return _build(svc)
