"""Prints a loopback TCP port for a server the project's scripts are about to start.

Why not bind(0): a port the kernel hands out for bind(0) lies in its ephemeral range, where every
later bind(0) and connect() of any process picks its ports too. Between this pick and the server's
own bind, one of the many sockets a `wrangler dev` opens (workerd's entry sockets, the inspector,
node's own) can take it; the server then exits "Address already in use" while another Worker
answers at that port, and a suite runs against the wrong Worker. So the port is drawn from below
the ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), where nothing picks ports by itself.

A port picked but not yet bound still passes a bind test, so each pick is written to a ledger
(SEMA_PORT_LEDGER, by default one file in the temporary directory, shared by every script of this
machine), locked while it is read and rewritten, and no port in it is picked again for HOLD seconds:
long enough for the server it was picked for to bind it, after which the bind test says it is taken.
"""

import fcntl
import os
import random
import socket
import tempfile
import time

SPAN = 16384
HOLD = 600


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


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
    low = ephemeral_low()
    first = max(1024, low - SPAN)
    if first < low:
        for _ in range(1000):
            port = random.randrange(first, low)
            if port not in taken and bindable(port):
                return port
    # No room below the range on this machine: fall back to the kernel's choice.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ledger = os.environ.get("SEMA_PORT_LEDGER") or os.path.join(tempfile.gettempdir(), "sema-port-ledger")
    now = time.time()
    with open(ledger, "a+") as f:
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
