"""The HTTP server of :func:`vllmstat.expose`'s page (``page._Page`` answers): connections kept
alive between requests, and HTTP read here rather than by ``http.server``."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, Dict, Tuple

# A kept-alive connection to the page idle this long is closed (its thread ends).
_IDLE_TIMEOUT = 120.0

# Limits of a request to the page: the request line or a header line (vllmstat's request line
# carries a few kilobytes of names), the number of headers, and a body that is read and dropped
# (a larger one closes the connection after the answer).
_MAX_LINE = 65536
_MAX_HEADERS = 100
_MAX_BODY = 65536
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_SERVER_ERROR = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _read_request(rfile):
    """Reads one request's line and headers: (method, target, version, headers by lower-case
    name), None at the end of the connection, or "bad" for what is not an HTTP/1.x request."""
    line = rfile.readline(_MAX_LINE + 1)
    if not line:
        return None
    parts = line.decode("iso-8859-1").split()
    if len(parts) != 3 or not line.endswith(b"\n") or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        return "bad"
    headers: Dict[str, str] = {}
    for _ in range(_MAX_HEADERS + 1):
        line = rfile.readline(_MAX_LINE + 1)
        if line in (b"\r\n", b"\n"):
            return parts[0], parts[1], parts[2], headers
        name, colon, value = line.decode("iso-8859-1").partition(":")
        if not colon or not line.endswith(b"\n") or name[:1].isspace() or name != name.rstrip():
            return "bad"  # the end of the connection, an overlong line, or not a header
        name, value = name.lower(), value.strip()
        headers[name] = headers[name] + ", " + value if name in headers else value
    return "bad"


def _keep_alive(version, headers):
    """Whether a connection goes on after this request (HTTP/1.1 unless the client closes it;
    HTTP/1.0 only when the client asks)."""
    tokens = {t.strip() for t in headers.get("connection", "").lower().split(",")}
    return "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens


_last_date: Tuple[int, str] = (0, "")  # the second a Date header was last made for, and the header


def _date():
    global _last_date
    now = int(time.time())
    if _last_date[0] != now:
        import email.utils
        _last_date = (now, email.utils.formatdate(now, usegmt=True))
    return _last_date[1]


# The most buffers one sendmsg call takes (Linux's IOV_MAX is 1024).
_MAX_BUFFERS = 512


def _send(sock, chunks):
    """Sends the chunks one after another, in as few writes as the socket takes them, without
    joining them first."""
    if not hasattr(sock, "sendmsg"):  # Windows
        sock.sendall(b"".join(chunks))
        return
    views = [memoryview(c) for c in chunks if c]
    while views:
        sent = sock.sendmsg(views[:_MAX_BUFFERS])
        # drop what went out; a socket with a timeout may take part of a buffer
        i = 0
        while i < len(views) and sent >= len(views[i]):
            sent -= len(views[i])
            i += 1
        del views[:i]
        if sent:
            views[0] = views[0][sent:]


def _server_classes():
    import socketserver

    class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
        """Answers scrapes concurrently (a boundary scrape may overlap a regular one), each
        connection in a thread of its own.

        Connections are kept alive between requests: a scrape on a new connection costs the
        engine's process an accepted socket and a new thread, more CPU than rendering the page.
        Closing the server closes the kept connections too.
        """

        daemon_threads = True
        allow_reuse_address = True
        answer: Callable[[str, str, Dict[str, str]], Any]

        def __init__(self, *args):
            self._conns: set = set()
            self._conns_lock = threading.Lock()
            super().__init__(*args)

        def server_bind(self):
            socketserver.TCPServer.server_bind(self)
            host, port = self.server_address[:2]
            self.server_name, self.server_port = str(host), int(port)

        def process_request_thread(self, request, client_address):
            with self._conns_lock:
                self._conns.add(request)
            try:
                super().process_request_thread(request, client_address)
            finally:
                with self._conns_lock:
                    self._conns.discard(request)

        def server_close(self):
            super().server_close()
            with self._conns_lock:
                conns = list(self._conns)
            for conn in conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # the connection's thread reads the end and returns
                except OSError:
                    pass

    class Server6(Server):
        address_family = socket.AF_INET6

    class Handler(socketserver.StreamRequestHandler):
        """Answers the requests of one connection, one after another, until the client closes
        it or asks to, sends what is not an HTTP/1.x request, or stays idle for _IDLE_TIMEOUT.

        HTTP is read here rather than by http.server, whose header parsing (the email package)
        costs a scrape more than rendering a one-engine page.
        """

        disable_nagle_algorithm = True  # an answer goes out in one write
        timeout = _IDLE_TIMEOUT

        def handle(self):
            try:
                while self._answer_one():
                    pass
            except OSError:
                pass  # the client went away, or stayed idle too long

        def _answer_one(self):
            """Answers one request; returns whether the connection goes on."""
            request = _read_request(self.rfile)
            if request is None:
                return False
            if request == "bad":
                self.connection.sendall(_BAD_REQUEST)
                return False
            method, target, version, headers = request
            keep = _keep_alive(version, headers)
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                self.connection.sendall(_BAD_REQUEST)
                return False
            if "transfer-encoding" in headers or not 0 <= length <= _MAX_BODY:
                keep = False  # a body the page does not read: the connection cannot go on
            elif length:
                self.rfile.read(length)
            try:
                status, fields, body = self.server.answer(method, target, headers)  # type: ignore[attr-defined]
            except Exception:  # a collector that fails: said on stderr, as prometheus_client's server does
                import traceback
                traceback.print_exc()
                self.connection.sendall(_SERVER_ERROR)
                return False
            head = ["HTTP/1.1 " + status, "Date: " + _date()]
            head += ["%s: %s" % (k, v) for k, v in fields if k]  # prometheus_client answers /favicon.ico with ""
            head.append("Content-Length: %d" % sum(map(len, body)))
            if not keep:
                head.append("Connection: close")
            elif version == "HTTP/1.0":
                head.append("Connection: keep-alive")
            out = ("\r\n".join(head) + "\r\n\r\n").encode("iso-8859-1")
            _send(self.connection, [out] if method == "HEAD" else [out, *body])
            return keep

    return Server, Server6, Handler


_Server, _Server6, _Handler = _server_classes()
