"""Reproducer: bytes a kernel-spliced `mode tcp` session (sockmap egress redirect) repeats.

Run portcullis (as root, kernel path on) with splice.cfg, the echo server, then the clients:

    portcullis -db -f contrib/splice-stress/splice.cfg &
    python3 contrib/splice-stress/echo.py 24998 &
    PAUSEP=0 CONN_SECS=0.7 python3 contrib/splice-stress/stress.py 24999 40 12

12 client threads open sessions one after another (0 to 1.4 s each), write a deterministic
stream in random sizes (100 B to 256 kB) and read it back in random sizes, checking every byte.
A mismatch names the client port (find it in the tcplog line) and where the bytes received
really come from: a negative delta means the stream repeated that many earlier bytes. echo.py
checks the client-to-server direction the same way and prints `C2S ...` on a mismatch.
With `portcullis-relay userspace` instead of `kernel`, no run has shown one.
"""
import socket, threading, time, random, sys, os, hashlib, subprocess
# usage: stress.py <proxy_port> <seconds> <nconn> <mode: echo|sink>
port=int(sys.argv[1]); secs=float(sys.argv[2]); n=int(sys.argv[3])
P=1000003
_B=random.Random(42).randbytes(P); BB=_B*3
def pat(off, ln, seed):
    # byte i of stream `seed`: _B[(i+seed) % P] (P prime: no small period)
    st=(off+seed)%P
    out=bytearray()
    while ln>0:
        take=min(ln, 2*P)
        out+=BB[st:st+take]; ln-=take; st=(st+take)%P
    return bytes(out)
PATCACHE={}
def chunk(seed, off, ln):
    # speed: precompute 1MB period? use bytes from a big block with period 8192*256
    return pat(off, ln, seed)
errors=[]; stats={}
stop=time.time()+secs
PAUSEP=float(os.environ.get("PAUSEP","0.05"))
CONN_SECS=float(os.environ.get("CONN_SECS","1.5"))
def run_loop(k):
    i=0
    while time.time()<stop and not errors:
        run1(k*1000+i); i+=1
def run(k): run_loop(k)
def run1(k):
    seed=k*31
    mystop=min(stop, time.time()+CONN_SECS*random.random()*2)
    s=socket.create_connection(("127.0.0.1",port))
    s.settimeout(30)
    sent=[0]; done=[False]
    def writer():
        rnd=random.Random(k)
        off=0
        try:
            while time.time()<mystop:
                ln=rnd.choice([100,1000,4096,65536,262144])
                s.sendall(pat(off,ln,seed)); off+=ln; sent[0]=off
                if rnd.random()<0.3: time.sleep(rnd.random()*0.02)
            s.shutdown(socket.SHUT_WR)
        except Exception as e:
            errors.append(f"conn {k} writer at {off}: {e}")
        done[0]=True
    t=threading.Thread(target=writer); t.start()
    rnd=random.Random(k+1000); off=0
    try:
        while True:
            b=s.recv(rnd.choice([1000,65536,262144]))
            if not b: break
            exp=pat(off,len(b),seed)
            if b!=exp:
                i=next(i for i in range(len(b)) if b[i]!=exp[i])
                got=b[i:i+64]
                pos=_B.find(got) if len(got)==64 else -1
                where = "unknown" if pos<0 else f"stream offset ~{(pos - seed) % P} mod P (delta {((pos-seed)%P) - ((off+i)%P)})"
                errors.append(f"conn {k} port {s.getsockname()[1]}: byte {off+i} differs (sent {sent[0]}, chunk at {off} len {len(b)}): got {where}"); break
            off+=len(b)
            if rnd.random()<PAUSEP: time.sleep(rnd.random()*0.5)
    except Exception as e:
        errors.append(f"conn {k} reader at {off} (sent {sent[0]}): {e}")
    t.join()
    if off!=sent[0] and not errors: errors.append(f"conn {k}: {off} back of {sent[0]}")
    stats[k]=off
ths=[threading.Thread(target=run,args=(k,)) for k in range(n)]
[t.start() for t in ths]; [t.join() for t in ths]
print("errors:",errors); print("bytes:",sum(stats.values()))
sys.exit(1 if errors else 0)
