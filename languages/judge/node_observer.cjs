// codeagent's judge for Node.js test runs (codeagent/harness/judge/node.py): preloaded into every node
// process of a graded run (NODE_OPTIONS=--require), it keeps node:assert's functions, and the paths the
// runners' results take (EventEmitter.prototype.emit, Readable.prototype.push), as they were at start,
// looks every 100 ms and at exit whether any was replaced, and at exit whether each assert still throws
// on a failing input; one JSON line per process, with its exit code, goes to the file named by
// CODEAGENT_JUDGE_NODE_RECORDS.
"use strict";
(function () {
  var records = process.env.CODEAGENT_JUDGE_NODE_RECORDS;
  if (!records) return;
  var fs = require("fs");
  var append = fs.appendFileSync;
  var assert = require("assert");
  var stringify = JSON.stringify;
  var failing = {
    ok: [false], equal: [1, 2], notEqual: [1, 1], strictEqual: [1, 2], notStrictEqual: [1, 1],
    deepEqual: [{ a: 1 }, { a: 2 }], deepStrictEqual: [{ a: 1 }, { a: 2 }], notDeepEqual: [{ a: 1 }, { a: 1 }],
    notDeepStrictEqual: [{ a: 1 }, { a: 1 }], throws: [function () {}], doesNotThrow: [function () { throw new Error("x"); }],
    match: ["a", /b/], doesNotMatch: ["a", /a/], fail: ["x"], ifError: [new Error("x")]
  };
  var owners = [["assert", assert], ["assert.strict", assert.strict]];
  // the paths a runner's results take: mocha's events, node:test's stream (a replaced one can turn a
  // failure into a pass without touching any assertion)
  var reported = [["EventEmitter.prototype.emit", require("events").prototype, "emit"],
                  ["Readable.prototype.push", require("stream").Readable.prototype, "push"],
                  ["Readable.prototype.read", require("stream").Readable.prototype, "read"],
                  ["Writable.prototype.write", require("stream").Writable.prototype, "write"]];
  var kept = [];
  owners.forEach(function (pair) {
    if (!pair[1]) return;
    kept.push([pair[0], pair[1], null, pair[1]]);
    Object.keys(failing).forEach(function (name) {
      if (typeof pair[1][name] === "function") kept.push([pair[0] + "." + name, pair[1], name, pair[1][name]]);
    });
  });
  var replaced = {};
  reported.forEach(function (entry) { entry.push(entry[1][entry[2]]); });
  function look() {
    var current = require("assert");
    if (current !== assert) replaced["require('assert')"] = true;
    reported.forEach(function (entry) { if (entry[1][entry[2]] !== entry[3]) replaced[entry[0]] = true; });
    kept.forEach(function (entry) {
      if (entry[2] !== null && entry[1][entry[2]] !== entry[3]) replaced[entry[0]] = true;
    });
  }
  function silent() {
    var found = [];
    kept.forEach(function (entry) {
      var fn = entry[2] === null ? entry[1] : entry[1][entry[2]];
      var args = entry[2] === null ? [false] : failing[entry[2]];
      if (typeof fn !== "function") { found.push(entry[0]); return; }
      try { fn.apply(entry[1], args); found.push(entry[0]); } catch (error) { /* it still fails a failing check */ }
    });
    return found;
  }
  var timer = setInterval(look, 100);
  if (timer.unref) timer.unref();
  // the record is written after every 'exit' listener ran: the exit code is then final (a runner may
  // set process.exitCode in its own listener, as mocha does)
  var emit = process.emit;
  process.emit = function (event) {
    var result = emit.apply(this, arguments);
    if (event === "exit") {
      look();
      var line = { pid: process.pid, ppid: process.ppid, argv: process.argv.slice(1, 4),
                   test_child: Boolean(process.env.NODE_TEST_CONTEXT),
                   exit: process.exitCode === undefined ? arguments[1] : process.exitCode,
                   replaced: Object.keys(replaced), silent: silent() };
      try { append(records, stringify(line) + "\n"); } catch (error) { /* a missing record is read as such */ }
    }
    return result;
  };
})();
