"""The raw bpf(2) pieces miniproxy.py and lossy_lo.py share: the syscall and the instruction
encoding (x86_64 syscall number)."""
import ctypes, os, struct

libc = ctypes.CDLL(None, use_errno=True)
SYS_BPF = 321


def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(bytes(attr), 128)
    r = libc.syscall(SYS_BPF, cmd, buf, 128)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf({cmd}): {os.strerror(e)}")
    return r


def insn(code, dst=0, src=0, off=0, imm=0):
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)
