#!/usr/bin/env python3
"""flood.py HOST PORT COUNT HOLD_S [--trickle]: opens COUNT TCP connections
to HOST:PORT (retrying while the port is not yet listening), holds them
HOLD_S seconds, then closes them.  Silent by default (test_security.sh's
starvation case); with --trickle each sends one byte every half second
while held (a slow-loris: talking, never finishing a hello).  Bounded in
count and time; loopback only."""
import socket, sys, time

host, port, count, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
trickle = "--trickle" in sys.argv[5:]
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
sent, until = 0, time.time() + hold
while trickle and time.time() < until:
    for s in socks:
        try:
            s.send(b"\x17")
            sent += 1
        except OSError:
            pass
    time.sleep(0.5)
if trickle:
    print(f"flood: {sent} bytes trickled", flush=True)
else:
    time.sleep(hold)
for s in socks:
    s.close()
