#!/usr/bin/env python3
"""flood.py HOST PORT COUNT HOLD_S: opens COUNT silent TCP connections to
HOST:PORT (retrying while the port is not yet listening), holds them
HOLD_S seconds, then closes them.  Bounded in count and time; loopback
only (test_security.sh's starvation case)."""
import socket, sys, time

host, port, count, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
if not host.startswith("127."):
    sys.exit("flood.py: loopback addresses only")
socks, end = [], time.time() + hold + 10
while len(socks) < count and time.time() < end:
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.connect((host, port))
        socks.append(s)
    except OSError:
        s.close()
        time.sleep(0.01)
print(f"flood: {len(socks)} connections open", flush=True)
time.sleep(hold)
for s in socks:
    s.close()
