"""What the table daemon's and the link controller's Prometheus metrics share.

Both expositions leave out the ``_created`` series (one per counter and histogram, which a
slot floor's Prometheus would store for nothing) and use the same latency buckets, so the
two processes' histograms can be read side by side (docs/operations.md, docs/link.md).
"""

from __future__ import annotations

import prometheus_client

from progressived.runtime.listen import raise_open_files_limit, serve_metrics
from progressived.runtime.metrics_http import MetricsServer

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

# Seconds: from 1 ms (a commit on a quiet machine) to 2.5 s (a stalled disk or broker).
LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Endpoint:
    """The HTTP exposition of a process's registry (``self.registry``), for both processes."""

    registry: prometheus_client.CollectorRegistry
    server: MetricsServer | None = None

    def serve(self, address: str, port: int) -> int:
        """Serve /metrics on ``address:port`` from a bounded server in its own thread
        (:mod:`progressived.runtime.metrics_http`); returns the bound port (a port that
        cannot be had raises :class:`progressived.runtime.listen.ListenError`). The
        process's soft descriptor limit is raised to its hard one first."""
        raise_open_files_limit()
        self.server = serve_metrics(self.registry, address, port, "[metrics]")
        return self.server.port

    def stop_serving(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)
