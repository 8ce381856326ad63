#!/usr/bin/env python3
"""trickle.py HOST PORT COUNT SECONDS: opens COUNT TCP connections to
HOST:PORT and, for SECONDS, sends one byte on each every half second (a
slow-loris: connected, talking, never finishing a hello), then closes
them.  Bounded in count and time; loopback only (test_security.sh)."""
import socket, sys, time

host, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
if not host.startswith("127."):
    sys.exit("trickle.py: loopback addresses only")
socks, end = [], time.time() + seconds
while len(socks) < count and time.time() < end:
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.connect((host, port))
        socks.append(s)
    except OSError:
        s.close()
        time.sleep(0.01)
print(f"trickle: {len(socks)} connections open", flush=True)
sent = 0
while time.time() < end:
    for s in socks:
        try:
            s.send(b"\x17")
            sent += 1
        except OSError:
            pass
    time.sleep(0.5)
for s in socks:
    s.close()
print(f"trickle: {sent} bytes sent", flush=True)
