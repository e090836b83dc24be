//! The bindings, in a state of their own (no registry, no thread-local state).

use std::borrow::Cow;
use std::rc::Rc;

use super::bridge;
use super::state::{run_action, run_convert, run_fetch, test_state};
use super::txn::Msg;
use crate::ana::sample::{SampleCtx, SampleValue};
use crate::ana::script::{Kind, Outcome, Tune};
use crate::ana::vars::{SessVars, VarName, Vars};
use crate::http::head::{Header, Headers, RequestHead, ResponseHead, Version};

fn req(target: &str, headers: &[(&str, &str)]) -> RequestHead {
    RequestHead {
        method: "GET".into(),
        target: target.into(),
        version: Version::Http11,
        headers: Headers(headers.iter().map(|(n, v)| Header::new(*n, *v)).collect()),
    }
}

fn res() -> ResponseHead {
    ResponseHead {
        version: Version::Http11,
        status: 200,
        reason: "OK".into(),
        headers: Headers(vec![Header::new("Content-Type", "text/plain")]),
    }
}

fn ctx<'a>(vars: &'a Vars) -> SampleCtx<'a> {
    let mut c = SampleCtx::new(
        "127.0.0.9:4242".parse().unwrap(),
        "127.0.0.1:80".parse().unwrap(),
        "fe",
    );
    c.vars = Some(vars);
    c
}

fn vars() -> Rc<Vars> {
    Vars::new(SessVars::default())
}

fn state(code: &str) -> super::state::State {
    test_state(code, Tune::default()).expect("the test script loads")
}

fn var(v: &Vars, name: &str) -> Option<SampleValue<'static>> {
    v.get(&VarName::parse(name).unwrap())
}

fn s(x: &str) -> SampleValue<'static> {
    SampleValue::Str(Cow::Owned(x.to_string()))
}

#[test]
fn request_headers_and_line_are_edited_in_place() {
    let st = state(
        r#"
        core.register_action("edit", {"http-req"}, function(txn, a)
          local h = txn.http:req_get_headers()
          txn:set_var("txn.first", h["x-two"][0])
          txn:set_var("txn.second", h["x-two"][1])
          txn:set_var("txn.none", tostring(h["missing"]))
          txn.http:req_set_header("X-Set", a)
          txn.http:req_add_header("X-Two", "3")
          txn.http:req_del_header("X-Gone")
          txn.http:req_rep_header("X-Rep", "^(a+)b$", "\\1c")
          txn.http:req_set_method("POST")
          txn.http:req_set_path("/new")
          txn.http:req_set_query("q=1")
        end, 1)
        "#,
    );
    let v = vars();
    let mut r = req(
        "/old?x=y",
        &[
            ("X-Two", "1"),
            ("x-two", "2"),
            ("X-Gone", "bye"),
            ("X-Rep", "aab"),
        ],
    );
    let out = run_action(
        &st,
        Kind::HttpReq,
        "edit",
        &["arg".into()],
        Msg::Req(&mut r),
        &ctx(&v),
    );
    assert_eq!(out, Outcome::Continue);
    assert_eq!(var(&v, "txn.first"), Some(s("1")));
    assert_eq!(var(&v, "txn.second"), Some(s("2")));
    assert_eq!(var(&v, "txn.none"), Some(s("nil")));
    assert_eq!(r.method, "POST");
    assert_eq!(r.target, "/new?q=1");
    assert_eq!(r.headers.get_last("x-set"), Some(&b"arg"[..]));
    assert_eq!(r.headers.get_all("x-two").count(), 3);
    assert!(!r.headers.contains("x-gone"));
    assert_eq!(r.headers.get_last("x-rep"), Some(&b"aac"[..]));
}

#[test]
fn done_with_a_reply_builds_haproxys_response() {
    let st = state(
        r#"
        core.register_action("pre", {"http-req"}, function(txn)
          local r = txn:reply()
          r:set_status(204)
          r:add_header("Access-Control-Allow-Origin", "http://a.test")
          r:add_header("Access-Control-Max-Age", 600)
          r:set_body("dropped: 204 has no body")
          txn:done(r)
          error("not reached")
        end)
        core.register_action("deny", {"http-req"}, function(txn)
          txn:done(txn:reply({status = 403, reason = "Go Away",
            headers = {["content-type"] = {"text/plain"}}, body = "no\n"}))
        end)
        core.register_action("close", {"http-req"}, function(txn) txn:done() end)
        "#,
    );
    let v = vars();
    let mut r = req("/", &[]);
    let Outcome::Reply { status, bytes } =
        run_action(&st, Kind::HttpReq, "pre", &[], Msg::Req(&mut r), &ctx(&v))
    else {
        panic!("a reply")
    };
    assert_eq!(status, 204);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.starts_with("HTTP/1.1 204 No Content\r\n"), "{text}");
    assert!(text.contains("access-control-allow-origin: http://a.test\r\n"));
    assert!(text.contains("access-control-max-age: 600\r\n"));
    assert!(!text.contains("content-length") && text.ends_with("\r\n\r\n"));
    let out = run_action(&st, Kind::HttpReq, "deny", &[], Msg::Req(&mut r), &ctx(&v));
    assert_eq!(
        out,
        Outcome::Reply {
            status: 403,
            bytes:
                b"HTTP/1.1 403 Go Away\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\nno\n"
                    .to_vec()
        }
    );
    let out = run_action(&st, Kind::HttpReq, "close", &[], Msg::Req(&mut r), &ctx(&v));
    assert_eq!(out, Outcome::Done);
}

#[test]
fn response_actions_and_priv_carry_over_from_the_request() {
    let st = state(
        r#"
        core.register_action("cors", {"http-req"}, function(txn)
          local h = txn.http:req_get_headers()
          if h["origin"] then txn:set_priv(h["origin"][0]) end
        end)
        core.register_action("cors", {"http-res"}, function(txn)
          local o = txn:get_priv()
          txn.http:res_add_header("Vary", "Origin")
          if o then txn.http:res_set_header("Access-Control-Allow-Origin", o) end
          txn.http:res_set_status(201, "Made")
        end)
        core.register_action("tbl", {"http-req"}, function(txn) txn:set_priv({n = 41}) end)
        core.register_action("tbl", {"http-res"}, function(txn)
          txn.http:res_set_header("X-N", txn:get_priv().n + 1)
        end)
        "#,
    );
    let v = vars();
    let mut r = req("/", &[("Origin", "http://a.test")]);
    run_action(&st, Kind::HttpReq, "cors", &[], Msg::Req(&mut r), &ctx(&v));
    let mut p = res();
    run_action(&st, Kind::HttpRes, "cors", &[], Msg::Res(&mut p), &ctx(&v));
    assert_eq!(p.status, 201);
    assert_eq!(p.reason, "Made");
    assert_eq!(p.headers.get_last("vary"), Some(&b"Origin"[..]));
    assert_eq!(
        p.headers.get_last("access-control-allow-origin"),
        Some(&b"http://a.test"[..])
    );
    // Another transaction does not see it.
    let v2 = vars();
    let mut p2 = res();
    run_action(
        &st,
        Kind::HttpRes,
        "cors",
        &[],
        Msg::Res(&mut p2),
        &ctx(&v2),
    );
    assert!(!p2.headers.contains("access-control-allow-origin"));
    // A table survives between the two actions of one transaction.
    let v3 = vars();
    run_action(&st, Kind::HttpReq, "tbl", &[], Msg::Req(&mut r), &ctx(&v3));
    let mut p3 = res();
    run_action(&st, Kind::HttpRes, "tbl", &[], Msg::Res(&mut p3), &ctx(&v3));
    assert_eq!(p3.headers.get_last("x-n"), Some(&b"42"[..]));
}

#[test]
fn fetch_objects_and_converters_use_the_sample_engine() {
    let st = state(
        r#"
        core.register_action("f", {"http-req"}, function(txn)
          txn:set_var("txn.src", txn.f:src())
          txn:set_var("txn.host", txn.sf:req_fhdr("host"))
          txn:set_var("txn.nohdr", "[" .. txn.sf:req_hdr("x-missing") .. "]")
          txn:set_var("txn.isnil", tostring(txn.f:req_hdr("x-missing")))
          txn:set_var("txn.port", txn.f:dst_port())
          txn:set_var("txn.up", txn.c:upper("abc"))
          txn:set_var("txn.len", txn.c:length("abcd"))
          txn:set_var("txn.path", txn.f:path())
        end)
        "#,
    );
    let v = vars();
    let mut r = req("/p?q", &[("Host", "a.test")]);
    run_action(&st, Kind::HttpReq, "f", &[], Msg::Req(&mut r), &ctx(&v));
    assert_eq!(var(&v, "txn.src"), Some(s("127.0.0.9")));
    assert_eq!(var(&v, "txn.host"), Some(s("a.test")));
    assert_eq!(var(&v, "txn.nohdr"), Some(s("[]")));
    assert_eq!(var(&v, "txn.isnil"), Some(s("nil")));
    assert_eq!(var(&v, "txn.port"), Some(SampleValue::Int(80)));
    assert_eq!(var(&v, "txn.up"), Some(s("ABC")));
    assert_eq!(var(&v, "txn.len"), Some(SampleValue::Int(4)));
    assert_eq!(var(&v, "txn.path"), Some(s("/p")));
}

#[test]
fn variables_of_every_scope_round_trip() {
    let st = state(
        r#"
        core.register_action("v", {"http-req"}, function(txn)
          txn:set_var("sess.s", "S")
          txn:set_var("req.n", 7)
          txn:set_var("txn.b", true)
          txn:set_var("proc.lua_unit_p", "P")
          txn:set_var("txn.only_if", "x", true)
          txn:set_var("txn.copy", txn:get_var("req.n") + 1)
          txn:set_var("txn.gone", "g")
          txn:unset_var("txn.gone")
          txn:set_var("bogus", "ignored")
        end)
        "#,
    );
    let v = vars();
    let mut r = req("/", &[]);
    run_action(&st, Kind::HttpReq, "v", &[], Msg::Req(&mut r), &ctx(&v));
    assert_eq!(var(&v, "sess.s"), Some(s("S")));
    assert_eq!(var(&v, "req.n"), Some(SampleValue::Int(7)));
    assert_eq!(var(&v, "txn.b"), Some(SampleValue::Bool(true)));
    assert_eq!(var(&v, "proc.lua_unit_p"), Some(s("P")));
    assert_eq!(var(&v, "txn.only_if"), None);
    assert_eq!(var(&v, "txn.copy"), Some(SampleValue::Int(8)));
    assert_eq!(var(&v, "txn.gone"), None);
}

#[test]
fn registered_fetches_and_converters_run() {
    let st = state(
        r#"
        core.register_fetches("greet", function(txn, who)
          return "hello " .. who .. " from " .. txn.f:src()
        end)
        core.register_fetches("nothing", function(txn) return nil end)
        core.register_converters("rev", function(v, sep) return v:reverse() .. (sep or "") end)
        core.register_converters("twice", function(v) return v * 2 end)
        "#,
    );
    let v = vars();
    assert_eq!(
        run_fetch(&st, "greet", &["bob".into()], &ctx(&v)),
        Some(s("hello bob from 127.0.0.9"))
    );
    assert_eq!(run_fetch(&st, "nothing", &[], &ctx(&v)), None);
    assert_eq!(run_fetch(&st, "unknown", &[], &ctx(&v)), None);
    assert_eq!(
        run_convert(&st, "rev", &["!".into()], &s("abc")),
        Some(s("cba!"))
    );
    assert_eq!(
        run_convert(&st, "twice", &[], &SampleValue::Int(21)),
        Some(SampleValue::Int(42))
    );
}

#[test]
fn a_runtime_error_or_a_timeout_leaves_the_message_and_the_state_usable() {
    let tune = Tune {
        session_timeout_ms: 50,
        forced_yield: 100,
        ..Tune::default()
    };
    let st = test_state(
        r#"
        core.register_action("boom", {"http-req"}, function(txn)
          txn.http:req_set_header("X-Before", "1")
          local t = nil
          t.x = 1
        end)
        core.register_action("spin", {"http-req"}, function(txn) while true do end end)
        core.register_action("ok", {"http-req"}, function(txn)
          txn.http:req_set_header("X-Ok", "1")
        end)
        core.register_action("early", {"http-req"}, function(txn)
          txn.http:req_set_header("X-Early", "1")
          core.done()
          txn.http:req_set_header("X-Late", "1")
        end)
        "#,
        tune,
    )
    .unwrap();
    let v = vars();
    let mut r = req("/", &[]);
    let out = run_action(&st, Kind::HttpReq, "boom", &[], Msg::Req(&mut r), &ctx(&v));
    assert_eq!(out, Outcome::Continue);
    // What the action did before the error stays, as in HAProxy.
    assert!(r.headers.contains("x-before"));
    let t0 = std::time::Instant::now();
    let out = run_action(&st, Kind::HttpReq, "spin", &[], Msg::Req(&mut r), &ctx(&v));
    assert_eq!(out, Outcome::Continue);
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    run_action(&st, Kind::HttpReq, "ok", &[], Msg::Req(&mut r), &ctx(&v));
    assert!(r.headers.contains("x-ok"));
    run_action(&st, Kind::HttpReq, "early", &[], Msg::Req(&mut r), &ctx(&v));
    assert!(r.headers.contains("x-early") && !r.headers.contains("x-late"));
}

#[test]
fn response_functions_are_refused_in_a_request_action() {
    let st = state(
        r#"
        core.register_action("wrong", {"http-req"}, function(txn)
          txn.http:res_set_header("X", "1")
          txn:set_var("txn.reached", 1)
        end)
        core.register_action("inject", {"http-req"}, function(txn)
          txn.http:req_set_header("X-Bad", "a\r\nInjected: 1")
        end)
        "#,
    );
    let v = vars();
    let mut r = req("/", &[]);
    run_action(&st, Kind::HttpReq, "wrong", &[], Msg::Req(&mut r), &ctx(&v));
    assert_eq!(var(&v, "txn.reached"), None);
    run_action(
        &st,
        Kind::HttpReq,
        "inject",
        &[],
        Msg::Req(&mut r),
        &ctx(&v),
    );
    assert!(!r.headers.contains("x-bad") && !r.headers.contains("injected"));
}

#[test]
fn core_tokenize_and_log_levels() {
    let st = state(
        r#"
        core.register_action("t", {"http-req"}, function(txn)
          local t = core.tokenize("GET,,PUT, POST", ", ", true)
          txn:set_var("txn.n", #t)
          txn:set_var("txn.last", t[#t])
          local u = core.tokenize("a,,b", ",")
          txn:set_var("txn.blank", #u)
          txn:set_var("txn.levels", core.emerg .. core.alert .. core.err .. core.info .. core.debug)
        end)
        "#,
    );
    let v = vars();
    let mut r = req("/", &[]);
    run_action(&st, Kind::HttpReq, "t", &[], Msg::Req(&mut r), &ctx(&v));
    assert_eq!(var(&v, "txn.n"), Some(SampleValue::Int(3)));
    assert_eq!(var(&v, "txn.last"), Some(s("POST")));
    assert_eq!(var(&v, "txn.blank"), Some(SampleValue::Int(3)));
    assert_eq!(var(&v, "txn.levels"), Some(s("01367")));
}

#[test]
fn samples_convert_both_ways() {
    let lua = mlua::Lua::new();
    let ip = SampleValue::Ip("127.0.0.1".parse().unwrap());
    let v = bridge::to_lua(&lua, &ip).unwrap();
    assert_eq!(bridge::from_lua(&v), Some(s("127.0.0.1")));
    let v = bridge::to_lua(&lua, &SampleValue::Int(-3)).unwrap();
    assert_eq!(bridge::from_lua(&v), Some(SampleValue::Int(-3)));
    assert_eq!(
        bridge::from_lua(&mlua::Value::Number(2.9)),
        Some(SampleValue::Int(2))
    );
    assert_eq!(bridge::from_lua(&mlua::Value::Nil), None);
    // Method names: `_` for `.`; arguments that would split are escaped.
    let e = bridge::fetch_expr("req_fhdr", &["a,b)".into()]).unwrap();
    assert!(format!("{:?}", e.fetch).contains("a,b)"), "{:?}", e.fetch);
    assert!(bridge::fetch_expr("no_such_fetch", &[]).is_err());
}

#[test]
fn services_frame_their_answer_and_fail_with_500() {
    use super::state::run_service;
    let tune = Tune {
        service_timeout_ms: 50,
        forced_yield: 100,
        ..Tune::default()
    };
    let st = test_state(
        r#"
        core.register_service("hi", "http", function(applet)
          applet:set_status(202)
          applet:add_header("X-Path", applet.path .. "?" .. applet.qs)
          applet:start_response()
          applet:send("a")
          applet:send(applet:getline() .. "b")
        end)
        core.register_service("loop", "http", function(applet) while true do end end)
        "#,
        tune,
    )
    .unwrap();
    let v = vars();
    let r = req("/p?q=1", &[]);
    let (status, bytes, close) = run_service(&st, "hi", &r, &ctx(&v)).unwrap();
    assert_eq!((status, close), (202, false));
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "HTTP/1.1 202 Accepted\r\nx-path: /p?q=1\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n"
    );
    let mut r10 = req("/", &[]);
    r10.version = Version::Http10;
    let (_, bytes, close) = run_service(&st, "hi", &r10, &ctx(&v)).unwrap();
    assert!(close);
    assert!(
        String::from_utf8(bytes)
            .unwrap()
            .starts_with("HTTP/1.0 202")
    );
    // A body the service cannot read: it fails, the client gets a 500.
    let post = req("/", &[("Content-Length", "4")]);
    assert_eq!(run_service(&st, "hi", &post, &ctx(&v)).unwrap().0, 500);
    // `tune.lua.service-timeout` stops a service that loops.
    assert_eq!(run_service(&st, "loop", &r, &ctx(&v)).unwrap().0, 500);
    assert!(run_service(&st, "nope", &r, &ctx(&v)).is_none());
}

#[test]
fn tracebacks_are_worded_as_haproxy() {
    use super::state::haproxy_traceback;
    // What mlua appends (Lua's luaL_traceback), and what HAProxy 2.6.12 printed for the same
    // errors (captured).
    let m = "t.lua:3: boom\nstack traceback:\n\t[C]: in ?\n\t[C]: in function 'error'\n\tt.lua:3: in function <t.lua:3>\n\t[C]: in ?";
    assert_eq!(
        haproxy_traceback(m).as_deref(),
        Some("[C]: in global 'error', t.lua:3: in function line 3")
    );
    let m = "t.lua:1: x\nstack traceback:\n\t[C]: in metamethod '__index'\n\tt.lua:1: in upvalue 'inner'\n\tt.lua:2: in function 'glob'\n\tt.lua:4: in function <t.lua:4>\n\t[C]: in ?";
    assert_eq!(
        haproxy_traceback(m).as_deref(),
        Some("t.lua:1: in upvalue 'inner', t.lua:2: in global 'glob', t.lua:4: in function line 4")
    );
    let m = "t.lua:5: y\nstack traceback:\n\t[C]: in ?\n\t[C]: in function 'string.rep'\n\tt.lua:5: in function <t.lua:5>\n\t[C]: in ?";
    assert_eq!(
        haproxy_traceback(m).as_deref(),
        Some("[C]: in field 'rep', t.lua:5: in function line 5")
    );
    let m = "t.lua:7: z\nstack traceback:\n\t[C]: in ?\n\tt.lua:7: in function <t.lua:7>\n\t(...tail calls...)\n\t[C]: in ?";
    assert_eq!(
        haproxy_traceback(m).as_deref(),
        Some("t.lua:7: in function line 7 ...")
    );
    assert_eq!(haproxy_traceback("no traceback"), None);
}
