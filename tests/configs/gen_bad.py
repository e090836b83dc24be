#!/usr/bin/env python3
"""Writes bad/*.cfg: one malformed configuration per case. The line marked `<<` is where the
error is expected; the marker is stripped. Prints the Rust table for tests/config_check.rs."""
import os

BASE_GLOBAL = "global\n    maxconn 100\n"
DEF = ("defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n"
       "    timeout connect 5s\n")
FE = "frontend fe\n    bind 127.0.0.1:18080\n    default_backend be\n"
BE = "backend be\n    server s1 127.0.0.1:18081\n"

def std(extra_fe="", extra_be="", extra=""):
    return BASE_GLOBAL + DEF + FE + extra_fe + BE + extra_be + extra

# (name, text, substring, haproxy also rejects it)
CASES = [
    ("unknown-keyword", std(extra_fe="    frobnicate on <<\n"),
     "unknown keyword 'frobnicate' in 'frontend' section", True),
    ("did-you-mean", std(extra_fe="    bindd 127.0.0.1:18082 <<\n"),
     "did you mean 'bind' maybe ?", True),
    ("out-of-section", "maxconn 10 <<\n" + std(), "unknown keyword 'maxconn' out of section", True),
    ("bind-in-backend", std(extra_be="    bind 127.0.0.1:18083 <<\n"),
     "'bind' not allowed because backend 'be' has no frontend capability", False),
    ("server-in-frontend", std(extra_fe="    server s9 127.0.0.1:18084 <<\n"),
     "'server' not allowed because frontend 'fe' has no backend capability", True),
    ("default-backend-in-backend", std(extra_be="    default_backend be <<\n"),
     "'default_backend' not allowed because backend 'be'", True),
    ("bad-time", std(extra_be="    timeout connect 5x <<\n"),
     "unexpected character 'x' in 'timeout connect'", True),
    ("bad-bind-port", std(extra_fe="    bind 127.0.0.1:99999 <<\n"), "'bind' : invalid port '99999'", True),
    ("bad-bind-address", std(extra_fe="    bind ipv4@::1:18085 <<\n"),
     "invalid address: '::1' in 'ipv4@::1:18085'", True),
    ("bad-number", BASE_GLOBAL + "    nbthread many <<\n" + DEF + FE + BE,
     "'nbthread' passed a missing or unparsable integer value in 'many'", True),
    ("rise-zero", std(extra_be="    server s2 127.0.0.1:18086 check rise 0 <<\n"),
     "'server be/s2' : 'rise' has to be > 0.", True),
    ("fall-zero", std(extra_be="    server s2 127.0.0.1:18086 fall 0 <<\n"),
     "'server be/s2' : 'fall' has to be > 0.", True),
    ("weight-range", std(extra_be="    server s2 127.0.0.1:18086 weight 300 <<\n"),
     "weight of server s2 is not within 0 and 256 (300)", True),
    ("unknown-default-backend", BASE_GLOBAL + DEF + "frontend fe\n    bind 127.0.0.1:18080\n    default_backend nope <<\n" + BE,
     "Proxy 'fe': unable to find required default_backend: 'nope'.", True),
    ("unknown-use-backend", std(extra_fe="    use_backend ghost if { path_beg /x } <<\n"),
     "Proxy 'fe': unable to find required use_backend: 'ghost'.", True),
    ("duplicate-frontend", std(extra="frontend fe <<\n    bind 127.0.0.1:18087\n"),
     "frontend 'fe' has the same name as frontend 'fe'", True),
    ("duplicate-backend", std(extra="backend be <<\n    server s1 127.0.0.1:18081\n"),
     "backend 'be' has the same name as backend 'be'", True),
    ("duplicate-server", std(extra_be="    server s1 127.0.0.1:18088 <<\n"),
     "another server named 's1' was already defined at line", True),
    ("conflicting-binds", std(extra="frontend fe2\n    bind 127.0.0.1:18080 <<\n    default_backend be\n"),
     "'bind 127.0.0.1:18080' : address already used by frontend 'fe'", False),
    ("ssl-missing-crt", std(extra_fe="    bind 127.0.0.1:18443 ssl crt /nonexistent/portcullis/cert.pem <<\n"),
     "unable to stat SSL certificate from file '/nonexistent/portcullis/cert.pem'", True),
    ("section-without-name", std(extra="backend <<\n    server s3 127.0.0.1:18089\n"),
     "'backend' expects an <id> argument", True),
    ("unterminated-quote", std(extra_fe="    http-request set-header X-A \"oops <<\n"),
     "unmatched quote at position", True),
    ("bad-env-brace", std(extra_fe="    http-request set-header X-A \"${HOME\" <<\n"),
     "unmatched brace in environment variable name", True),
    ("bad-hex-escape", std(extra_fe="    http-request set-header X-A a\\xzz <<\n"),
     "truncated or invalid hexadecimal sequence", True),
    ("unknown-option", std(extra_fe="    option frobnicate <<\n"), "unknown option 'frobnicate'", True),
    ("bad-balance", std(extra_be="    balance nope <<\n"), "balance only supports", True),
    ("bad-mode", std(extra_be="    mode htt <<\n"), "unknown proxy mode 'htt'.", True),
    ("bad-http-request-action", std(extra_fe="    http-request frob <<\n"),
     "'http-request' expects", True),
    ("bad-redirect-code", std(extra_fe="    http-request redirect scheme https code 999 <<\n"),
     "unsupported HTTP code '999'", True),
    ("unknown-server-keyword", std(extra_be="    server s2 127.0.0.1:18086 frob <<\n"),
     "'server be/s2' : unknown keyword 'frob'.", True),
    ("bad-log-facility", std(extra_fe="    log stdout local9 <<\n"), "log : unknown log facility 'local9'", True),
    ("bad-stats-socket-level", BASE_GLOBAL + "    stats socket /tmp/portcullis-bad.sock level root <<\n" + DEF + FE + BE,
     "''level' only supports 'user', 'operator', and 'admin' (got 'root')'", True),
    ("bad-timeout-name", std(extra_fe="    timeout clientx 5s <<\n"), "'timeout' supports 'client'", True),
    ("bad-http-check-expect", std(extra_be="    option httpchk\n    http-check expect foo 200 <<\n"),
     "'http-check expect' : only supports", True),
    ("bad-tcp-request", std(extra_fe="    tcp-request content frob <<\n"), "'tcp-request content' expects", True),
    ("acl-in-anonymous-defaults", BASE_GLOBAL + DEF + "    acl a path /x <<\n" + FE + BE,
     "'acl' not allowed in anonymous 'defaults' section.", True),
    ("server-in-defaults", BASE_GLOBAL + DEF + "    server s 127.0.0.1:18090 <<\n" + FE + BE,
     "'server' not allowed in 'defaults' section.", True),
    ("unknown-defaults-from", std(extra="backend be2 from nope <<\n"),
     "defaults section 'nope' not found for backend 'be2'.", True),
    ("bad-proxy-name", std(extra="backend be/x <<\n"),
     "character '/' is not permitted in 'backend' name 'be/x'.", True),
    ("mode-mismatch", BASE_GLOBAL + DEF + "frontend fe\n    bind 127.0.0.1:18080\n    default_backend be <<\n"
     + "backend be\n    mode tcp\n    server s1 127.0.0.1:18081\n",
     "tries to use incompatible tcp backend 'be'", True),
    ("duplicate-proxy-id", std(extra_fe="    id 7\n", extra="backend be2 <<\n    id 7\n"),
     "backend be2 reuses same custom id as frontend fe", True),
    ("bad-server-port", std(extra_be="    server s2 127.0.0.1:99999 <<\n"), "'server be/s2' : invalid port '99999'", True),
    ("bad-stats-refresh", std(extra="listen st\n    bind 127.0.0.1:18091\n    stats refresh 5q <<\n"),
     "unexpected character 'q' in argument to stats refresh interval.", True),
    ("bad-hard-stop-after", BASE_GLOBAL + "    hard-stop-after 10x <<\n" + DEF + FE + BE,
     "unexpected character 'x' in argument to <hard-stop-after>.", True),
]

here = os.path.dirname(os.path.abspath(__file__))
os.makedirs(os.path.join(here, "bad"), exist_ok=True)
rows = []
for i, (name, text, sub, hap) in enumerate(CASES, 1):
    lines = text.split("\n")
    marked = [n for n, l in enumerate(lines, 1) if l.endswith(" <<")]
    assert len(marked) == 1, name
    text = "\n".join(l[:-3] if l.endswith(" <<") else l for l in lines)
    fname = f"{i:02d}-{name}.cfg"
    with open(os.path.join(here, "bad", fname), "w") as f:
        f.write(f"# bad config: {name}\n" + text)
    rows.append(f'    ("{fname}", {marked[0] + 1}, "{sub.replace(chr(34), chr(92) + chr(34))}", {"true" if hap else "false"}),')
print("\n".join(rows))
