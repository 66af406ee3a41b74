"""Observability: Prometheus metrics and the JSON status, served over HTTP on one address.

``GET /metrics``: the Prometheus text format (prometheus_client, a registry of its own per
controller so several controllers can live in one process). ``GET /status``: the controller's
:meth:`~coflow.ctl.daemon.Controller.status` as JSON (what ``coflow ctl status`` prints).
Bind it to 127.0.0.1 (the default of ``--metrics``).
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# round phases take from ~0.1 ms (compute) to seconds (a full re-push after a restart)
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02,
           0.03, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        self.round_seconds = Histogram("coflow_ctl_round_seconds",
                                       "Controller round latency by phase (read counters, "
                                       "compute, write) and in total", ["phase"],
                                       buckets=BUCKETS, registry=r)
        self.rounds = Counter("coflow_ctl_rounds", "Controller rounds run", ["kind"], registry=r)
        self.write_errors = Counter("coflow_ctl_write_errors", "P4Runtime writes that failed",
                                    ["switch"], registry=r)
        self.read_errors = Counter("coflow_ctl_read_errors", "P4Runtime counter reads that failed",
                                   ["switch"], registry=r)
        self.updates = Counter("coflow_ctl_updates", "P4Runtime updates written", ["switch"],
                               registry=r)
        self.switch_up = Gauge("coflow_ctl_switch_primary",
                               "1 when this controller is the switch's primary, 0.5 backup, 0 down",
                               ["switch"], registry=r)
        self.coflows = Gauge("coflow_ctl_coflows", "Registered coflows by Aalo queue (1 = highest; "
                             "rate modes: by priority order rank)", ["queue"], registry=r)
        self.reconnects = Counter("coflow_ctl_reconnects", "Switch reconnections", ["switch"],
                                  registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class StatusServer:
    """/metrics and /status on ``host:port`` (port 0 picks one; ``address`` has the real one)."""

    def __init__(self, address: str, metrics: Metrics, status_fn):
        host, _, port = address.rpartition(":")
        metrics_ref, status_ref = metrics, status_fn

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if self.path.startswith("/metrics"):
                    body, ctype = metrics_ref.exposition(), CONTENT_TYPE_LATEST
                elif self.path.startswith("/status"):
                    body = json.dumps(status_ref(), indent=1, default=str).encode()
                    ctype = "application/json"
                else:
                    self.send_error(404, "try /metrics or /status")
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
        self.httpd.daemon_threads = True
        self.address = f"{self.httpd.server_address[0]}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="ctl-status-http")
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
