"""What the table daemon's and the link controller's Prometheus metrics share.

Both expositions leave out the ``_created`` series (one per counter and histogram, which a
slot floor's Prometheus would store for nothing) and use the same latency buckets, so the
two processes' histograms can be read side by side (docs/operations.md, docs/link.md).
"""

from __future__ import annotations

import prometheus_client

from progressived.runtime.listen import serve_metrics

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

# Seconds: from 1 ms (a commit on a quiet machine) to 2.5 s (a stalled disk or broker).
LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Endpoint:
    """The HTTP exposition of a process's registry (``self.registry``), for both processes."""

    registry: prometheus_client.CollectorRegistry

    def serve(self, address: str, port: int) -> int:
        """Serve /metrics on ``address:port`` in a thread; returns the bound port (a port
        that cannot be had raises :class:`progressived.runtime.listen.ListenError`)."""
        return serve_metrics(self.registry, address, port, "[metrics]")

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)
