"""Scrapes a loader's metrics endpoint (unix:/PATH or HOST:PORT) with a raw HTTP/1.1 GET and
parses the body with prometheus_client's text parser; prints {"name{labels}": value} as JSON.
usage: scrape_metrics.py ADDR [REQUEST]   (REQUEST: raw bytes to send instead, printed back)"""
import json
import socket
import sys

from prometheus_client.parser import text_string_to_metric_families


def exchange(addr, request, limit_s=20):
    if addr.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(limit_s)
        s.connect(addr[5:])
    else:
        host, port = addr.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=limit_s)
    s.sendall(request)
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return data


def scrape(addr):
    """The samples of one scrape, {"name{labels}": value}, after checking the response."""
    raw = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n")
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode("ascii").split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK", lines[0]
    headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    assert headers["content-type"].startswith("text/plain; version=0.0.4"), headers
    assert int(headers["content-length"]) == len(body), (headers, len(body))
    out = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        assert family.documentation, family.name
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[s.name + ("{" + labels + "}" if labels else "")] = s.value
    return out


def main():
    addr = sys.argv[1]
    if len(sys.argv) > 2:
        print(exchange(addr, sys.argv[2].encode().decode("unicode_escape").encode("latin-1")).split(b"\r\n", 1)[0].decode())
        return
    print(json.dumps(scrape(addr), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
