"""replay.py LISTEN_PORT ROOT_HOST ROOT_PORT — a man in the middle that
captures a rank's authenticated hello to the bootstrap root and replays
it on a connection of its own (test_security.sh).

One rank is pointed at LISTEN_PORT instead of the root.  The proxy relays
the root's challenge to it and reads the rank's answer (its proof and
HELLO frame).  Before passing that on, it opens a second connection to the
root, reads that connection's challenge and sends the captured bytes as
they are.  A root that checks the proof against each connection's own
challenge must refuse: the proxy prints "replay refused: error frame" (or
"replay refused: closed") when the root answered with an ERROR frame (or
closed the connection), "replay ACCEPTED: frame type N" otherwise.  Then
it passes the genuine hello on and relays both ways until either side
closes, so the rank still joins.
"""

import select
import socket
import struct
import sys
import time

CHALLENGE = 4 + 16          # magic, nonce (net/auth.h)
PROOF = 16 + 32             # nonce, tag
FRAME_HDR = 12              # magic, type, length (bootstrap/wire.h)
FRAME_ERROR = 3


def read_exact(sock, n, deadline):
    data = b""
    while len(data) < n:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("closed after %d of %d bytes" % (len(data), n))
        data += chunk
    return data


def connect(host, port, deadline):
    while True:
        try:
            return socket.create_connection((host, port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def replay(host, port, captured):
    deadline = time.monotonic() + 15
    sock = connect(host, port, deadline)
    try:
        read_exact(sock, CHALLENGE, deadline)
        sock.sendall(captured)
        hdr = read_exact(sock, FRAME_HDR, deadline)
    except (EOFError, ConnectionResetError):
        return "replay refused: closed"
    except socket.timeout:
        return "replay left waiting (no answer in 15 s)"
    finally:
        sock.close()
    kind = struct.unpack(">III", hdr)[1]
    if kind == FRAME_ERROR:
        return "replay refused: error frame"
    return "replay ACCEPTED: frame type %d" % kind


def relay(a, b, deadline):
    socks = [a, b]
    while time.monotonic() < deadline:
        ready, _, _ = select.select(socks, [], [], 0.5)
        for s in ready:
            data = s.recv(65536)
            if not data:
                return
            (b if s is a else a).sendall(data)


def main():
    listen_port, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    deadline = time.monotonic() + 60
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", listen_port))
    lst.listen(1)
    lst.settimeout(30)
    rank, _ = lst.accept()
    root = connect(host, port, deadline)
    rank.sendall(read_exact(root, CHALLENGE, deadline))
    head = read_exact(rank, PROOF + FRAME_HDR, deadline)
    length = struct.unpack(">III", head[PROOF:])[2]
    captured = head + read_exact(rank, length, deadline)
    print(replay(host, port, captured), flush=True)
    root.sendall(captured)
    relay(rank, root, deadline)
    print("relayed the genuine hello", flush=True)


if __name__ == "__main__":
    main()
