#!/usr/bin/python3
"""A TCP relay that records what passes: what an on-path observer of a connection sees.

usage: tcp_record.py --to HOST:PORT --port-file FILE --out PREFIX [--seconds S] [--corrupt-record N]
Listens on 127.0.0.1 (a free port, written to FILE), forwards each connection to HOST:PORT,
and appends the bytes each way to PREFIX.c2s and PREFIX.s2c. --corrupt-record N flips one
bit in the N-th encrypted TLS record (type 23) each client sends, after its route: in TLS
1.3 the first carries the end of its handshake, the second its first frame (a modified
record). Ends after S seconds.
"""
import argparse, selectors, socket, time

p = argparse.ArgumentParser()
p.add_argument("--to", required=True)
p.add_argument("--port-file", required=True)
p.add_argument("--out", required=True)
p.add_argument("--seconds", type=float, default=120)
p.add_argument("--corrupt-record", type=int, default=0)
a = p.parse_args()
host, port = a.to.rsplit(":", 1)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
ls.setblocking(False)
sel = selectors.DefaultSelector()
sel.register(ls, selectors.EVENT_READ, None)
with open(a.port_file + ".tmp", "w") as f:
    f.write(f"127.0.0.1:{ls.getsockname()[1]}\n")
import os
os.rename(a.port_file + ".tmp", a.port_file)
c2s, s2c = open(a.out + ".c2s", "ab"), open(a.out + ".s2c", "ab")
pending = {}  # client socket -> [bytes not yet forwarded (a partial record), encrypted records seen]
end = time.time() + a.seconds
while time.time() < end:
    for key, _ in sel.select(timeout=0.2):
        if key.data is None:
            c, _ = ls.accept()
            s = socket.create_connection((host, int(port)))
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sel.register(c, selectors.EVENT_READ, (s, c2s, c))
            sel.register(s, selectors.EVENT_READ, (c, s2c, None))
            pending[c] = [b"", 0]
            continue
        src, (dst, log, client) = key.fileobj, key.data
        try:
            b = src.recv(65536)
        except OSError:
            b = b""
        if not b:
            for x in (src, dst):
                try:
                    sel.unregister(x)
                except (KeyError, ValueError):
                    pass
                x.close()
            continue
        if client is not None and a.corrupt_record:
            st = pending[client]
            buf, out = st[0] + b, b""
            if st[1] == 0 and buf[:4] == b"XCDR":  # the route (wire-protocol.md 2.3) precedes TLS
                if len(buf) < 12 or len(buf) < 12 + int.from_bytes(buf[8:12], "little"):
                    st[0] = buf
                    continue
                n = 12 + int.from_bytes(buf[8:12], "little")
                out, buf = buf[:n], buf[n:]
            while len(buf) >= 5 and len(buf) >= 5 + int.from_bytes(buf[3:5], "big"):
                n = 5 + int.from_bytes(buf[3:5], "big")
                rec = buf[:n]
                buf = buf[n:]
                if rec[0] == 23:
                    st[1] += 1
                    if st[1] == a.corrupt_record:
                        rec = rec[:5] + bytes([rec[5] ^ 1]) + rec[6:]
                out += rec
            st[0] = buf
            b = out
            if not b:
                continue
        log.write(b)
        log.flush()
        try:
            dst.sendall(b)
        except OSError:
            pass
