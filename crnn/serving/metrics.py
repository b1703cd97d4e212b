"""The service's Prometheus metrics (GET /metrics, text format), in a registry of its own."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
ENDPOINTS = ("/v1/read", "/v1/models", "/healthz", "/readyz", "/metrics", "/")


class Metrics:
    """Requests by endpoint and status, request latency, batch sizes and forward-pass time, queue depth."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Counter("crnn_requests", "HTTP requests answered, by endpoint and status code",
                                ["endpoint", "status"], registry=r)
        self.latency = Histogram("crnn_request_duration_seconds", "Time from request to response, by endpoint",
                                 ["endpoint"], buckets=LATENCY_BUCKETS, registry=r)
        self.images = Counter("crnn_images_read", "Images read, by model", ["model"], registry=r)
        self.batch_size = Histogram("crnn_batch_size", "Images per forward pass, by model", ["model"],
                                    buckets=BATCH_BUCKETS, registry=r)
        self.forward_time = Histogram("crnn_forward_duration_seconds", "Time of one batched forward pass",
                                      ["model"], buckets=LATENCY_BUCKETS, registry=r)
        self.queue_depth = Gauge("crnn_queue_depth", "Images waiting for the network, by model", ["model"],
                                 registry=r)
        self.in_flight = Gauge("crnn_requests_in_flight", "Requests being answered now", registry=r)
        self.active = 0  # POST /v1/read requests among them, for the log line of a drain

    @staticmethod
    def endpoint(path: str) -> str:
        """The endpoint label of a path (unknown paths share one label, so scanners cannot blow up the series)."""
        return path if path in ENDPOINTS else "other"

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        ep = self.endpoint(path)
        self.requests.labels(ep, str(status)).inc()
        self.latency.labels(ep).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
