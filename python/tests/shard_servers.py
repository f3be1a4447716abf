"""Test servers for tar shards over HTTP: Debian's nginx started as the
current user on 127.0.0.1 (a temporary config, a free port), and a small
Python server whose successive requests follow a fault plan (503, a
connection dropped in the body, a changed ETag) for the retry tests."""
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port, proc, what):
    """Until something accepts on port (the server's own readiness), or the
    process exits; the deadline only turns a hang into a failure."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited with %s" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("%s did not listen on %d" % (what, port))


NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 256; }}
http {{
  log_format ranges '"$request" $status $body_bytes_sent "$http_range"';
  access_log {tmp}/access.log ranges;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  server {{
    listen 127.0.0.1:{port};
    root {root};
    location /unavailable/ {{ return 503; }}
    location /missing/ {{ return 404; }}
  }}
}}
"""


class Nginx:
    """nginx serving `root` at http://127.0.0.1:PORT/ (/unavailable/...
    answers 503, /missing/... 404)."""

    def __init__(self, root, tmp):
        os.makedirs(tmp, exist_ok=True)
        for _ in range(5):
            self.port = free_port()
            conf = os.path.join(tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF.format(tmp=tmp, port=self.port, root=root))
            self.proc = subprocess.Popen([NGINX, "-p", tmp, "-c", conf, "-e", tmp + "/error.log"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                _wait_listening(self.port, self.proc, "nginx")
                break
            except RuntimeError:
                self.proc.kill()
                self.proc.wait()
        else:
            raise RuntimeError("nginx did not start: %s" % open(tmp + "/error.log").read())
        self.url = "http://127.0.0.1:%d" % self.port
        self.access_log = os.path.join(tmp, "access.log")

    def log(self, since=0, at_least=0):
        """Access log lines from line `since` on ('"REQUEST" STATUS BYTES
        "RANGE"'). nginx writes a line after the response is sent, so a
        client can be done before its line is there: waits for at_least."""
        deadline = time.monotonic() + 30
        while True:
            with open(self.access_log) as f:
                lines = f.read().splitlines()[since:]
            if len(lines) >= at_least or time.monotonic() > deadline:
                return lines
            time.sleep(0.01)

    def close(self):
        self.proc.terminate()
        self.proc.wait()


class FaultServer:
    """Serves files of `root` with ranges and ETags; request k (from 0)
    follows plan[k] when given: "503", "drop" (headers, half the body,
    then the connection closed), "etag" (another ETag), else served.
    `requests` lists (path, Range header) in order."""

    def __init__(self, root, plan=()):
        self.root, self.plan, self.requests = root, list(plan), []
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                with server.lock:
                    k = len(server.requests)
                    server.requests.append((self.path, self.headers.get("Range")))
                action = server.plan[k] if k < len(server.plan) else "ok"
                if action == "503":
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path = os.path.join(server.root, self.path.lstrip("/"))
                total = os.path.getsize(path)
                start, end = 0, total - 1
                rng = self.headers.get("Range")
                if rng:
                    a, b = rng.split("=")[1].split("-")
                    start = int(a)
                    end = min(int(b), total - 1) if b else total - 1
                with open(path, "rb") as f:  # only the range: shards are big
                    f.seek(start)
                    body = f.read(end + 1 - start)
                self.send_response(206 if rng else 200)
                self.send_header("ETag", '"v2"' if action == "etag" else '"v1"')
                if rng:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, total))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if action == "drop":
                    self.wfile.write(body[:len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
