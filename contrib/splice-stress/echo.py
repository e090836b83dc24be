"""Echo server for stress.py: echoes every connection and checks the client-to-server stream
(the same deterministic bytes, its seed found from the first 64), printing `C2S ...` on a
mismatch."""
import socket, threading, sys, random
P=1000003
B=random.Random(42).randbytes(P); BB=B*3
def pat(off, ln, seed):
    st=(off+seed)%P; out=bytearray()
    while ln>0:
        take=min(ln,2*P); out+=BB[st:st+take]; ln-=take; st=(st+take)%P
    return bytes(out)
l=socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR,1); l.bind(("127.0.1.113",int(sys.argv[1]))); l.listen(128)
def h(c):
    seed=None; off=0; bad=False; head=b""
    try:
        while True:
            b=c.recv(262144)
            if not b: break
            if not bad:
                if seed is None:
                    head+=b
                    if len(head)>=64:
                        seed=(B.find(head[:64]))%P
                        data=head; head=None
                    else:
                        c.sendall(b); continue
                else:
                    data=b
                exp=pat(off,len(data),seed)
                if data!=exp:
                    i=next(i for i in range(len(data)) if data[i]!=exp[i])
                    got=data[i:i+64]; pos=B.find(got) if len(got)==64 else -1
                    print(f"C2S seed {seed}: byte {off+i} differs (chunk at {off} len {len(data)}): delta {((pos-seed)%P)-((off+i)%P) if pos>=0 else '?'}", flush=True)
                    bad=True
                off+=len(data)
            c.sendall(b)
        c.shutdown(socket.SHUT_WR)
    except Exception as e: pass
    c.close()
while True:
    c,_=l.accept(); threading.Thread(target=h,args=(c,),daemon=True).start()
