"""A minimal sockmap splice proxy, with none of portcullis's code: raw bpf(2) syscalls load a
hand-assembled sk_skb verdict (and optionally a stream parser), a SOCKHASH keyed by socket cookie
holds each session's two sockets (cookie(client) -> server, cookie(server) -> client), and the
verdict redirects every skb to the peer's egress (bpf_sk_redirect_hash, flags 0). Userspace only
watches for the end of stream (poll POLLRDHUP), waits until the peer socket has handed every
received byte to TCP, and shuts the peer's write side.

    python3 miniproxy.py <listen_port> <server_ip:port>

Variants (environment):
  PARSER=1        attach a stream parser too (strparser path) instead of verdict-only
  PARSER_MAX=n    with PARSER=1: the parser returns min(skb->len, n)
  ATTACH=sv|v     verdict attach type: BPF_SK_SKB_STREAM_VERDICT (sv, default) or BPF_SK_SKB_VERDICT
  KICK=lowat|peek|none  how the bytes queued before the insertion reach the verdict
                  (lowat, default: SO_RCVLOWAT runs tcp_data_ready(); peek: MSG_PEEK recv)
  READERS=1       also keep a blocking recv() pending on each socket, as portcullis's relay does
                  (whatever it returns is counted as bytes the redirect leaked to userspace)
  READERS=nb      the same with non-blocking recv() and poll(), as io_uring does
  SAMPLE=1        getsockopt(TCP_INFO) on both sockets every 5 ms, as portcullis's flow control
  SNDBUF=n / RCVBUF=n   set SO_SNDBUF / SO_RCVBUF on both proxy sockets before insertion
  NODELAY=1       TCP_NODELAY on both proxy sockets
  INGRESS=1       redirect with BPF_F_INGRESS (diagnostic only: not a relay)
Prints one line per session end with anything odd, and totals on SIGINT/SIGTERM.
"""
import ctypes, os, select, signal, socket, struct, sys, threading, time

from bpfsys import bpf, insn, libc
BPF_MAP_CREATE, BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM, BPF_PROG_LOAD, BPF_PROG_ATTACH = 0, 2, 3, 5, 8
BPF_MAP_TYPE_SOCKHASH = 18
BPF_PROG_TYPE_SK_SKB = 14
BPF_SK_SKB_STREAM_PARSER, BPF_SK_SKB_STREAM_VERDICT, BPF_SK_SKB_VERDICT = 4, 5, 38
SO_COOKIE = 57
FN_GET_SOCKET_COOKIE, FN_SK_REDIRECT_HASH = 46, 72


def prog_load(insns, log=True):
    code = b"".join(insns)
    cbuf = ctypes.create_string_buffer(code, len(code))
    lic = ctypes.create_string_buffer(b"GPL")
    logbuf = ctypes.create_string_buffer(65536)
    attr = struct.pack("<IIQQIIQ", BPF_PROG_TYPE_SK_SKB, len(insns), ctypes.addressof(cbuf),
                       ctypes.addressof(lic), 1 if log else 0, 65536 if log else 0,
                       ctypes.addressof(logbuf) if log else 0)
    try:
        return bpf(BPF_PROG_LOAD, attr)
    except OSError:
        print(logbuf.value.decode(errors="replace"), file=sys.stderr)
        raise


def verdict_prog(map_fd, flags):
    return [
        insn(0xbf, dst=6, src=1),              # r6 = ctx
        insn(0x61, dst=0, src=6, off=0),       # r0 = skb->len
        insn(0x55, dst=0, off=2, imm=0),       # if r0 != 0 goto redirect
        insn(0xb7, dst=0, imm=0),              # bare FIN: SK_DROP (TCP has seen the FIN)
        insn(0x95),
        insn(0xbf, dst=1, src=6),              # redirect: r1 = ctx
        insn(0x85, imm=FN_GET_SOCKET_COOKIE),
        insn(0x7b, dst=10, src=0, off=-8),     # *(u64 *)(fp - 8) = cookie
        insn(0x18, dst=2, src=1, imm=map_fd),  # r2 = map (ld_imm64 pseudo map fd)
        insn(0x00),
        insn(0xbf, dst=1, src=6),
        insn(0xbf, dst=3, src=10),
        insn(0x07, dst=3, imm=-8),             # r3 = &cookie
        insn(0xb7, dst=4, imm=flags),
        insn(0x85, imm=FN_SK_REDIRECT_HASH),   # r0 = SK_PASS (redirected) or SK_DROP
        insn(0x95),
    ]


def parser_prog(cap):
    p = [insn(0x61, dst=0, src=1, off=0)]      # r0 = skb->len
    if cap:
        p += [insn(0xa5, dst=0, off=1, imm=cap),  # if r0 < cap goto exit
              insn(0xb7, dst=0, imm=cap)]
    return p + [insn(0x95)]


def cookie(s):
    return struct.unpack("<Q", s.getsockopt(socket.SOL_SOCKET, SO_COOKIE, 8))[0]


def tcp_info(s):
    b = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    # tcpi_bytes_acked at 120, tcpi_bytes_received at 128 (struct tcp_info, linux/tcp.h)
    return struct.unpack_from("<QQ", b, 120)


def outq(s):
    import fcntl, termios
    return struct.unpack("<i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]


def handed(s):
    return tcp_info(s)[0] + outq(s)


class Maps:
    def __init__(self):
        self.fd = bpf(BPF_MAP_CREATE, struct.pack("<IIIII", BPF_MAP_TYPE_SOCKHASH, 8, 4, 65536, 0))
        flags = 1 if os.environ.get("INGRESS") == "1" else 0
        vfd = prog_load(verdict_prog(self.fd, flags))
        if os.environ.get("PARSER") == "1":
            pfd = prog_load(parser_prog(int(os.environ.get("PARSER_MAX", "0"))))
            bpf(BPF_PROG_ATTACH, struct.pack("<IIII", self.fd, pfd, BPF_SK_SKB_STREAM_PARSER, 0))
        at = BPF_SK_SKB_VERDICT if os.environ.get("ATTACH") == "v" else BPF_SK_SKB_STREAM_VERDICT
        bpf(BPF_PROG_ATTACH, struct.pack("<IIII", self.fd, vfd, at, 0))

    def update(self, key, sock):
        k = ctypes.create_string_buffer(struct.pack("<Q", key), 8)
        v = ctypes.create_string_buffer(struct.pack("<I", sock.fileno()), 4)
        bpf(BPF_MAP_UPDATE_ELEM, struct.pack("<IIQQQ", self.fd, 0, ctypes.addressof(k),
                                             ctypes.addressof(v), 0))

    def delete(self, key):
        k = ctypes.create_string_buffer(struct.pack("<Q", key), 8)
        try:
            bpf(BPF_MAP_DELETE_ELEM, struct.pack("<IIQ", self.fd, 0, ctypes.addressof(k)))
        except OSError:
            pass


STATS = {"sessions": 0, "leaked": 0, "stuck": 0}
LOCK = threading.Lock()


def reader(s, name, tag, nonblocking):
    # Mirrors portcullis: a read always pending on a spliced socket (io_uring: a non-blocking
    # recv, then a poll for POLLIN, then the recv again).
    p = select.poll()
    p.register(s, select.POLLIN)
    while True:
        try:
            if nonblocking:
                try:
                    b = s.recv(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    p.poll(1000)
                    continue
            else:
                b = s.recv(65536)
        except OSError:
            return
        if not b:
            return
        with LOCK:
            STATS["leaked"] += len(b)
        print(f"{tag}: {len(b)} bytes of {name} reached userspace", flush=True)


def sampler(c, s):
    # Mirrors portcullis's flow control: TCP_INFO on both sockets every 5 ms.
    while True:
        try:
            tcp_info(c)
            tcp_info(s)
        except OSError:
            return
        time.sleep(0.005)


def session(maps, c, upstream):
    s = socket.create_connection(upstream)
    for x in (c, s):
        if os.environ.get("NODELAY") == "1":
            x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if os.environ.get("SNDBUF"):
            x.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, int(os.environ["SNDBUF"]))
        if os.environ.get("RCVBUF"):
            x.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(os.environ["RCVBUF"]))
    tag = f"client port {c.getpeername()[1]}"
    cc, sc = cookie(c), cookie(s)
    # handed: what the proxy socket had sent (its SYN) before; received counts from the start.
    base = {id(c): (handed(c), 0), id(s): (handed(s), 0)}
    # The server socket goes in first (it receives nothing until the client's bytes reach it);
    # the client's skbs then always find cookie(c) -> s.
    try:
        maps.update(cc, s)
        maps.update(sc, c)
    except OSError as e:
        # EOPNOTSUPP: a socket no longer established (the client gave up).
        print(f"{tag}: insert: {e}", flush=True)
        maps.delete(cc)
        c.close()
        s.close()
        return
    # Bytes that arrived before the insertion wait in the receive queue until the next
    # data_ready; SO_RCVLOWAT calls tcp_data_ready() at once, which runs the verdict on them.
    for x in (c, s):
        if os.environ.get("KICK", "lowat") == "lowat":
            x.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
        elif os.environ.get("KICK") == "peek":
            # What portcullis did: a non-blocking MSG_PEEK (tcp_recvmsg: runs no verdict).
            try:
                x.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except OSError:
                pass
    if os.environ.get("READERS") in ("1", "nb"):
        nb = os.environ.get("READERS") == "nb"
        for x, n in ((c, "c2s"), (s, "s2c")):
            threading.Thread(target=reader, args=(x, n, tag, nb), daemon=True).start()
    if os.environ.get("SAMPLE") == "1":
        threading.Thread(target=sampler, args=(c, s), daemon=True).start()
    done = {}
    peer = {c.fileno(): s, s.fileno(): c}
    src = {c.fileno(): c, s.fileno(): s}
    p = select.poll()
    for x in (c, s):
        p.register(x, select.POLLRDHUP)
    while len(done) < 2:
        for fd, ev in p.poll(1000):
            if fd in done:
                continue
            a, b = src[fd], peer[fd]
            # Every byte `a` received (minus its FIN) must be in `b`'s TCP before b's FIN.
            want = tcp_info(a)[1] - base[id(a)][1] - 1
            t0 = time.time()
            while handed(b) - base[id(b)][0] < want:
                if time.time() - t0 > 10:
                    with LOCK:
                        STATS["stuck"] += 1
                    print(f"{tag}: stuck: {handed(b) - base[id(b)][0]} of {want} handed", flush=True)
                    break
                time.sleep(0.001)
            try:
                b.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            done[fd] = True
            p.unregister(fd)
    maps.delete(cc)
    maps.delete(sc)
    c.close()
    s.close()
    with LOCK:
        STATS["sessions"] += 1


def main():
    port = int(sys.argv[1])
    host, uport = sys.argv[2].rsplit(":", 1)
    maps = Maps()
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port))
    l.listen(128)

    def bye(*_):
        print("stats:", STATS, flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    signal.signal(signal.SIGINT, bye)
    print("ready", flush=True)
    while True:
        c, _ = l.accept()
        threading.Thread(target=session, args=(maps, c, (host, int(uport))), daemon=True).start()


if __name__ == "__main__":
    main()
