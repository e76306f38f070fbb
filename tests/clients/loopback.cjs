// Preloaded (`node --require loopback.cjs ...`) into third-party servers the tests start, so
// that they listen on 127.0.0.1 only: the reference MCP server binds every interface and has
// no option to choose one, and servers in these tests bind to loopback.
"use strict";
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const [first] = args;
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    const callbacks = args.filter((a) => typeof a === "function");
    return listen.call(this, Number(first), "127.0.0.1", ...callbacks);
  }
  if (first && typeof first === "object" && first.path === undefined) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
