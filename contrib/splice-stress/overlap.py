"""Deterministic reproducer of the repeat: a partial TCP retransmission into a spliced socket.

    python3 overlap.py <proxy_port> [echo_port]       (root: raw socket and TCP_REPAIR)

Runs an echo server on 127.0.1.117:<echo_port> (default 26997) — point the proxy under test at
it — and a client K through the proxy. K sends A (1000 bytes), gets its echo, then a raw socket
injects, as from K, the segment [end(A) - 10, end(A) + 10): the last 10 bytes of A again and the
first 10 of B, as a retransmission after a lost ACK looks. TCP queues that skb untrimmed
(tcp_data_queue: "Partial packet, seq < rcv_next < end_seq"); K then sends B (1000 bytes),
whose first 10 bytes the proxy socket has already got: another partial overlap. A reader that
honours copied_seq (recv, the strparser path) delivers A + B; the verdict-only sockmap path
(tcp_read_skb) hands both skbs to the verdict whole, and the echo comes back with 20 repeated
bytes. Exit status 0 when the echo is exactly A + B.
"""
import socket, struct, sys, threading, time

ECHO_HOST = "127.0.1.117"
TCP_REPAIR, TCP_REPAIR_QUEUE, TCP_QUEUE_SEQ = 19, 20, 21
TCP_RECV_QUEUE, TCP_SEND_QUEUE = 1, 2


def echo_server(port, ready):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((ECHO_HOST, port))
    l.listen(8)
    ready.set()
    while True:
        c, _ = l.accept()

        def h(c=c):
            while True:
                b = c.recv(65536)
                if not b:
                    break
                c.sendall(b)
            c.close()

        threading.Thread(target=h, daemon=True).start()


def queue_seq(s, queue):
    s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
    try:
        s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, queue)
        return s.getsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ)
    finally:
        s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 0)


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def inject(src, dst, seq, ack, payload):
    sport, dport = src[1], dst[1]
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, 0x18, 65535, 0, 0)  # PSH|ACK, no options
    pseudo = socket.inet_aton(src[0]) + socket.inet_aton(dst[0]) + struct.pack(
        "!BBH", 0, socket.IPPROTO_TCP, len(hdr) + len(payload))
    csum = checksum(pseudo + hdr + payload)
    hdr = hdr[:16] + struct.pack("!H", csum) + hdr[18:]
    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    r.sendto(hdr + payload, (dst[0], 0))
    r.close()


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            break
        out += b
    return out


def main():
    port = int(sys.argv[1])
    eport = int(sys.argv[2]) if len(sys.argv) > 2 else 26997
    ready = threading.Event()
    threading.Thread(target=echo_server, args=(eport, ready), daemon=True).start()
    ready.wait()
    a = bytes((i * 7 + 1) % 251 for i in range(1000))
    b = bytes((i * 13 + 5) % 241 for i in range(1000))
    k = socket.create_connection(("127.0.0.1", port))
    k.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    k.settimeout(5)
    time.sleep(0.3)  # the proxy splices the session
    k.sendall(a)
    got = recv_exact(k, len(a))
    time.sleep(0.2)  # A acknowledged: K's send queue is empty
    end = queue_seq(k, TCP_SEND_QUEUE)
    ack = queue_seq(k, TCP_RECV_QUEUE)
    inject(k.getsockname(), k.getpeername(), end - 10, ack, a[-10:] + b[:10])
    time.sleep(0.2)
    k.sendall(b)
    k.shutdown(socket.SHUT_WR)
    try:
        while True:
            x = k.recv(65536)
            if not x:
                break
            got += x
    except socket.timeout:
        pass
    want = a + b
    if got == want:
        print(f"ok: echo is the {len(want)} bytes sent")
        return 0
    i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
    print(f"REPEAT: echo has {len(got)} bytes for {len(want)} sent; first difference at byte {i}")
    return 1


sys.exit(main())
