"""Drops a random share of the packets leaving `lo` (a tcx egress eBPF program, raw bpf(2)), to
provoke TCP retransmissions. Run it ONLY inside a network namespace of its own, since it drops
on that namespace's loopback:

    ip netns add sprc; ip -n sprc link set lo up; ip -n sprc addr add 127.0.1.117/8 dev lo
    ip netns exec sprc python3 lossy_lo.py 5      # drop 5 packets in 1000, until killed

(no netem or iptables needed). Holds the link until SIGTERM/SIGINT.
"""
import ctypes, os, signal, struct, sys, time

from bpfsys import bpf, insn, libc
BPF_PROG_LOAD, BPF_LINK_CREATE = 5, 28
BPF_PROG_TYPE_SCHED_CLS = 3
BPF_TCX_EGRESS = 47
FN_GET_PRANDOM_U32 = 7


def main():
    per_mille = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    prog = [
        insn(0x85, imm=FN_GET_PRANDOM_U32),      # r0 = random
        insn(0x97, dst=0, imm=1000),             # r0 %= 1000
        insn(0xa5, dst=0, off=2, imm=per_mille), # if r0 < per_mille goto drop
        insn(0xb7, dst=0, imm=0),                # TCX_PASS
        insn(0x95),
        insn(0xb7, dst=0, imm=2),                # drop: TCX_DROP
        insn(0x95),
    ]
    code = b"".join(prog)
    cbuf = ctypes.create_string_buffer(code, len(code))
    lic = ctypes.create_string_buffer(b"GPL")
    # bpf_attr for PROG_LOAD: prog_type, insn_cnt, insns, license, log_level, log_size, log_buf,
    # kern_version, prog_flags, prog_name[16], prog_ifindex, expected_attach_type.
    attr = struct.pack("<IIQQIIQII", BPF_PROG_TYPE_SCHED_CLS, len(prog), ctypes.addressof(cbuf),
                       ctypes.addressof(lic), 0, 0, 0, 0, 0) + b"\0" * 16 + struct.pack("<II", 0, BPF_TCX_EGRESS)
    pfd = bpf(BPF_PROG_LOAD, attr)
    ifindex = socket_ifindex("lo")
    lfd = bpf(BPF_LINK_CREATE, struct.pack("<IIII", pfd, ifindex, BPF_TCX_EGRESS, 0))
    print(f"dropping {per_mille}/1000 of lo egress (link fd {lfd})", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        time.sleep(3600)


def socket_ifindex(name):
    import socket
    return socket.if_nametoindex(name)


if __name__ == "__main__":
    main()
