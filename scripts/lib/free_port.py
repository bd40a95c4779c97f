"""Prints a loopback TCP port for a server the project's scripts are about to start.

Why not bind(0): a port the kernel hands out for bind(0) lies in its ephemeral range, where every
later bind(0) and connect() of any process picks its ports too. Between this pick and the server's
own bind, one of the many sockets a `wrangler dev` opens (workerd's entry sockets, the inspector,
node's own) can take it; the server then exits "Address already in use" while another Worker
answers at that port, and a suite runs against the wrong Worker. So the port is drawn from below
the ephemeral range (/proc/sys/net/ipv4/ip_local_port_range) or above it, where nothing picks ports
by itself.

A port picked but not yet bound still passes a bind test, so each pick is written to a ledger
(SEMA_PORT_LEDGER, by default one file per user in the temporary directory, shared by every script
that user runs with that temporary directory), locked while it is read and rewritten, and no port in
it is picked again for HOLD seconds: long enough for the server it was picked for to bind it, after
which the bind test says it is taken.
"""

import fcntl
import os
import random
import socket
import sys
import tempfile
import time

SPAN = 16384
HOLD = 600


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split()[:2])
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


def outside_ephemeral():
    """The ports outside the ephemeral range: up to SPAN below it, and all above it."""
    low, high = ephemeral_range()
    return list(range(max(1024, low - SPAN), low)) + list(range(high + 1, 65536))


def bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def pick(taken):
    ports = outside_ephemeral()
    for _ in range(min(1000, 4 * len(ports))):
        port = random.choice(ports)
        if port not in taken and bindable(port):
            return port
    # No room outside the range on this machine: the kernel's choice, with the race it brings.
    print("free_port: no free port outside the ephemeral range; using bind(0)", file=sys.stderr)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ledger = os.environ.get("SEMA_PORT_LEDGER") or os.path.join(
        tempfile.gettempdir(), f"sema-port-ledger-{os.getuid()}"
    )
    now = time.time()
    try:
        f = open(ledger, "a+")
    except OSError as e:
        # Without the ledger two picks of one script may collide; say so and pick anyway.
        print(f"free_port: no ledger ({e}); picking without it", file=sys.stderr)
        print(pick({}))
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        held = {}
        for line in f.read().splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[0].isdigit():
                try:
                    at = float(fields[1])
                except ValueError:
                    continue
                if now - at < HOLD:
                    held[int(fields[0])] = at
        port = pick(held)
        held[port] = now
        f.seek(0)
        f.truncate()
        f.write("".join(f"{p} {at:.3f}\n" for p, at in held.items()))
        f.flush()
    print(port)


if __name__ == "__main__":
    main()
