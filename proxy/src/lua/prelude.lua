-- The Lua side of HAProxy's API in portcullis: the classes of the objects an action, a fetch
-- or a converter receives. Every object of one call holds `__n`, the native function of that
-- call (valid only while it runs), which does the work in Rust (lua/txn.rs).
local HTTP_OPS = {
  "req_get_headers", "req_set_header", "req_add_header", "req_del_header",
  "req_rep_header", "req_rep_value", "req_set_method", "req_set_path", "req_set_query",
  "req_set_uri", "res_get_headers", "res_set_header", "res_add_header", "res_del_header",
  "res_rep_header", "res_rep_value", "res_set_status",
}
local TXN_OPS = {
  "set_var", "get_var", "unset_var", "get_priv", "set_priv", "log", "Debug", "Info",
  "Warning", "Alert", "done",
}

local HTTP = {}
HTTP.__index = HTTP
for _, op in ipairs(HTTP_OPS) do
  HTTP[op] = function(self, ...) return rawget(self, "__n")(op, ...) end
end

local TXN_METHODS = {}
for _, op in ipairs(TXN_OPS) do
  TXN_METHODS[op] = function(self, ...) return rawget(self, "__n")(op, ...) end
end

-- txn:reply(): HAProxy's reply object (status, reason, headers = {name = {values}}, body).
local REPLY = {}
REPLY.__index = REPLY
function REPLY:set_status(status, reason)
  self.status = status
  self.reason = reason
end
function REPLY:add_header(name, value)
  local h = self.headers[name]
  if h == nil then
    h = {}
    self.headers[name] = h
  end
  h[#h + 1] = tostring(value)
end
function REPLY:del_header(name)
  self.headers[name] = nil
end
function REPLY:set_body(body)
  self.body = body
end
function TXN_METHODS.reply(_, t)
  t = t or {}
  local r = setmetatable({ status = t.status or 200, reason = t.reason, headers = {},
                           body = t.body or "" }, REPLY)
  if type(t.headers) == "table" then
    for name, v in pairs(t.headers) do
      if type(v) == "table" then
        for _, x in ipairs(v) do r:add_header(name, x) end
      else
        r:add_header(name, v)
      end
    end
  end
  return r
end

-- txn.f / txn.sf (fetches) and txn.c / txn.sc (converters): any method name is a keyword,
-- with '_' standing for '.' (txn.f:req_fhdr("host") is req.fhdr(host)).
local FETCH = {}
FETCH.__index = function(_, kw)
  return function(self, ...) return rawget(self, "__n")("fetch", kw, rawget(self, "__s"), ...) end
end
local CONV = {}
CONV.__index = function(_, kw)
  return function(self, ...) return rawget(self, "__n")("conv", kw, rawget(self, "__s"), ...) end
end

-- The sub-objects are made at their first use: most actions touch one or two of them.
local LAZY = {
  http = function(o) return rawget(o, "__http") and setmetatable({ __n = rawget(o, "__n") }, HTTP) end,
  f = function(o) return setmetatable({ __n = rawget(o, "__n"), __s = false }, FETCH) end,
  sf = function(o) return setmetatable({ __n = rawget(o, "__n"), __s = true }, FETCH) end,
  c = function(o) return setmetatable({ __n = rawget(o, "__n"), __s = false }, CONV) end,
  sc = function(o) return setmetatable({ __n = rawget(o, "__n"), __s = true }, CONV) end,
}
local function lazy_index(methods)
  return function(o, k)
    local m = methods[k]
    if m ~= nil then return m end
    local make = LAZY[k]
    if make == nil then return nil end
    local v = make(o)
    if not v then return nil end
    rawset(o, k, v)
    return v
  end
end
local TXN = { __index = lazy_index(TXN_METHODS) }

-- core.register_service("…", "http", fn): the AppletHTTP object.
local APPLET_OPS = {
  "set_status", "add_header", "start_response", "send", "getline", "receive",
  "get_priv", "set_priv", "get_var", "set_var", "unset_var",
}
local APPLET_METHODS = {}
for _, op in ipairs(APPLET_OPS) do
  APPLET_METHODS[op] = function(self, ...) return rawget(self, "__n")(op, ...) end
end
local APPLET = { __index = lazy_index(APPLET_METHODS) }

return {
  -- The txn object of one call; `http` is false outside HTTP.
  txn = function(n, http)
    return setmetatable({ __n = n, __http = http }, TXN)
  end,
  -- The applet of one service call; `fields` holds method, version, path, qs, length, headers.
  applet = function(n, fields)
    fields.__n = n
    return setmetatable(fields, APPLET)
  end,
}
