"""A server that speaks PostgreSQL's startup and then answers nothing (a proxy whose
server died): for the client deadline tests. ``python tests/wedged_pg.py`` prints its port."""

from __future__ import annotations

import socket
import struct
import threading


def serve(conn: socket.socket) -> None:
    try:
        while True:
            head = conn.recv(8)
            if len(head) < 8:
                return
            length, code = struct.unpack("!ii", head)
            if length > 8:
                conn.recv(length - 8)  # the parameters: not read further
            if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest
                conn.sendall(b"N")
                continue
            break  # the StartupMessage
        out = struct.pack("!cii", b"R", 8, 0)
        for k, v in (("server_version", "16.0"), ("client_encoding", "UTF8"),
                     ("standard_conforming_strings", "on"), ("integer_datetimes", "on"),
                     ("DateStyle", "ISO, MDY")):
            body = k.encode() + b"\0" + v.encode() + b"\0"
            out += b"S" + struct.pack("!i", len(body) + 4) + body
        out += b"K" + struct.pack("!iii", 12, 1234, 5678) + b"Z" + struct.pack("!i", 5) + b"I"
        conn.sendall(out)
        while conn.recv(65536):
            pass  # read every query, answer none
    except OSError:
        pass

def main() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    print(s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
