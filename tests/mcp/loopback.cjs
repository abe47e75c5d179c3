// Preloaded with `node --require tests/mcp/loopback.cjs ...` (tests/mcp/everything.py): a
// server told only a port (server-everything's `app.listen(PORT)`) listens on 127.0.0.1
// instead of every interface. A listen that names a host, a path or a handle is unchanged.
"use strict";

const net = require("node:net");

const LOOPBACK = "127.0.0.1";
const listen = net.Server.prototype.listen;

function isPort(value) {
  return typeof value === "number" || (typeof value === "string" && /^\d+$/.test(value));
}

net.Server.prototype.listen = function (...args) {
  const [first] = args;
  if (isPort(first) && typeof args[1] !== "string") {
    args.splice(1, 0, LOOPBACK); // listen(port[, backlog][, callback])
  } else if (first && typeof first === "object" && "port" in first
             && first.host === undefined && first.path === undefined) {
    args[0] = { ...first, host: LOOPBACK }; // listen({port, ...}[, callback])
  }
  return listen.apply(this, args);
};
