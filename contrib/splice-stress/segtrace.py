"""Records the TCP segments going to a port on `lo` (AF_PACKET, headers only) and, on SIGTERM,
lists every data segment that starts below what its connection already received and ends past
it: a partial retransmission, which TCP queues untrimmed (tcp_data_queue, "Partial packet").

    ip netns exec sprc python3 segtrace.py 26999 > trace.txt &
"""
import signal, socket, struct, sys

port = int(sys.argv[1])
ETH_P_IP = 0x0800
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
s.bind(("lo", 0))
conns = {}  # client port -> [isn, highest end seen, count]
events = []


def done(*_):
    for e in events:
        print(e)
    print(f"connections {len(conns)} partial-overlaps {len(events)}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, done)
signal.signal(signal.SIGINT, done)
while True:
    pkt, addr = s.recvfrom(128)
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    # Ethernet header (14, zeroed on lo), then IPv4.
    ip = pkt[14:]
    if len(ip) < 40 or ip[9] != 6:
        continue
    ihl = (ip[0] & 15) * 4
    tot = struct.unpack_from("!H", ip, 2)[0]
    tcp = ip[ihl:]
    sport, dport, seq = struct.unpack_from("!HHI", tcp, 0)
    if dport != port:
        continue
    doff = (tcp[12] >> 4) * 4
    flags = tcp[13]
    plen = tot - ihl - doff
    c = conns.get(sport)
    if flags & 0x02:  # SYN
        conns[sport] = [seq, (seq + 1) & 0xFFFFFFFF]
        continue
    if c is None or plen <= 0:
        continue
    end = (seq + plen) & 0xFFFFFFFF
    hi = c[1]
    rel = lambda x: (x - c[0]) & 0xFFFFFFFF
    if rel(seq) < rel(hi) < rel(end):
        events.append(f"port {sport}: segment [{rel(seq)}, {rel(end)}) len {plen} overlaps "
                      f"{rel(hi) - rel(seq)} bytes already sent up to {rel(hi)}")
    if rel(end) > rel(hi):
        c[1] = end
