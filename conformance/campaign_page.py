"""The campaign's counters page, served beside Dask's dashboard: ``/`` (a small HTML page that refreshes
itself every second) and ``/counters.json`` (the figures of :meth:`Counters.snapshot`).

Invariant: the page shows only what the counters hold at the moment it asks; the server runs in a daemon
thread and stops when the block of :func:`serving` ends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>kvexact fuzzing campaign</title>
<style>body{font-family:sans-serif;margin:2em}td,th{padding:.2em .8em;text-align:right}
th:first-child,td:first-child{text-align:left}</style></head>
<body><h1>kvexact fuzzing campaign</h1>
<p>Workers and tasks: <a id="dask" href="#">Dask dashboard</a> &middot; elapsed <span id="elapsed">0</span> s</p>
<table>
<tr><th>examples</th><td id="examples">0</td></tr>
<tr><th>steps</th><td id="steps">0</td></tr>
<tr><th>steps per second</th><td id="steps_per_second">0</td></tr>
<tr><th>failures</th><td id="failures">0</td></tr>
<tr><th>slices</th><td id="slices">0</td></tr>
<tr><th>restarts (lost workers)</th><td id="restarts">0</td></tr>
</table>
<h2>Rules fired per machine</h2>
<table id="machines"><tr><th>machine</th><th>rules fired</th><th>seconds since a new rule fired</th></tr></table>
<script>
async function refresh() {
  try {
    const c = await (await fetch("counters.json", {cache: "no-store"})).json();
    for (const k of ["examples", "steps", "steps_per_second", "failures", "slices", "restarts",
                     "elapsed"]) {
      document.getElementById(k).textContent = k === "elapsed" ? c.elapsed_seconds : c[k];
    }
    if (c.dask_dashboard) document.getElementById("dask").href = c.dask_dashboard;
    const rows = Object.entries(c.machines).map(([name, m]) =>
      `<tr class="machine" id="machine-${name}"><td>${name}</td><td>${m.rules_fired}/${m.rules}</td>` +
      `<td>${m.seconds_since_new_rule}</td></tr>`).join("");
    document.getElementById("machines").innerHTML =
      "<tr><th>machine</th><th>rules fired</th><th>seconds since a new rule fired</th></tr>" + rows;
  } catch (e) { /* the campaign has ended: keep the last figures */ }
}
refresh(); setInterval(refresh, 1000);
</script></body></html>
"""


def _handler(snapshot: Callable[[], dict[str, Any]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] == "/counters.json":
                body, kind = json.dumps(snapshot()).encode(), "application/json"
            elif self.path.split("?")[0] in ("/", "/index.html"):
                body, kind = PAGE.encode(), "text/html; charset=utf-8"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the campaign prints its own lines
            pass

    return Handler


@contextmanager
def serving(snapshot: Callable[[], dict[str, Any]], host: str = "127.0.0.1", port: int = 8788
            ) -> Iterator[str]:
    """Serve the page on ``host:port`` (0: any free port) while the block runs; yields its address."""
    server = ThreadingHTTPServer((host, port), _handler(snapshot))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="kvexact-counters-page", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
