"""The one exception a request can end in: an HTTP status and a one-line message naming the problem."""
from __future__ import annotations


class RequestError(Exception):
    """A request the service refuses: ``status`` (4xx for the client's mistakes, 503/504 for load) and a message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.status = status
        self.message = str(self)
        self.headers = headers or {}


class ServeError(ValueError):
    """Bad service settings (weights, limits, port); one-line message with the fix."""
