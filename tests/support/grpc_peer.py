"""A gRPC server and client on loopback for tests/grpc.rs (python3-grpcio, no protoc: a
generic handler with raw-bytes messages).

  grpc_peer.py server PORT     serves until stdin closes; prints "ready" once listening
  grpc_peer.py client TARGET   runs the calls, prints one line per outcome
"""
import sys
from concurrent import futures

import grpc

SERVICE = "test.Echo"


def unary(request, context):
    context.set_trailing_metadata((("x-trailer", "unary"),))
    return b"echo:" + request


def stream(request, context):
    for i in range(3):
        yield b"part%d:" % i + request


def deny(request, context):
    context.abort(grpc.StatusCode.PERMISSION_DENIED, "no access for " + request.decode())


def serve(port):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
        "Deny": grpc.unary_unary_rpc_method_handler(deny),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_insecure_port("127.0.0.1:%s" % port)
    server.start()
    print("ready", flush=True)
    sys.stdin.read()
    server.stop(0)


def client(target):
    with grpc.insecure_channel(target) as ch:
        u = ch.unary_unary("/%s/Unary" % SERVICE)
        resp, call = u.with_call(b"hello", timeout=5)
        trailers = dict(call.trailing_metadata() or ())
        print("unary", resp.decode(), call.code().name, trailers.get("x-trailer"))
        s = ch.unary_stream("/%s/Stream" % SERVICE)
        parts = [m.decode() for m in s(b"abc", timeout=5)]
        print("stream", ",".join(parts))
        d = ch.unary_unary("/%s/Deny" % SERVICE)
        try:
            d(b"bob", timeout=5)
            print("deny no error")
        except grpc.RpcError as e:
            print("deny", e.code().name, e.details())


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2])
    else:
        client(sys.argv[2])
