// Preload (node --require) for peers that listen on every interface (the
// reference server-everything calls app.listen(PORT)): force every TCP
// listen onto 127.0.0.1, so tests never expose a port beyond loopback.
"use strict";
const net = require("net");
const orig = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const a0 = args[0];
  if (a0 !== null && typeof a0 === "object" && !Array.isArray(a0)) {
    if (a0.path === undefined) args[0] = { ...a0, host: "127.0.0.1" };
  } else if (typeof a0 === "number" || (typeof a0 === "string" && /^\d+$/.test(a0))) {
    if (typeof args[1] === "string") args[1] = "127.0.0.1";
    else args.splice(1, 0, "127.0.0.1");
  } else if (a0 === undefined || typeof a0 === "function") {
    args.unshift(0, "127.0.0.1");
  }
  return orig.apply(this, args);
};
