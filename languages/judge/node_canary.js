
// @ts-ignore
;(function codeagentJudgeCanary() { // codeagent's judge (codeagent/harness/judge/node.py): tests that must be reported failing
  // @ts-ignore
  var define = typeof it === "function" ? it : typeof test === "function" ? test : null;
  if (typeof define !== "function") return;
  // @ts-ignore
  var load = function (name) { return typeof require === "function" ? Promise.resolve(require(name)) : import(name); };
  // @ts-ignore
  var record = function (fs, kind) { (fs.default || fs).appendFileSync("@RECORDS@", JSON.stringify({ canary: @INDEX@, kind: kind, pid: process.pid }) + "\n"); };
  // @ts-ignore
  define("codeagent canary @NONCE@ @INDEX@ assert@SUFFIX@", async function () {
    // @ts-ignore
    var fs = await load("fs"), assert = await load("assert");
    record(fs, "assert");
    // @ts-ignore
    (assert.default || assert).strictEqual("@SECRET@", "@SECRET@!");
  });
  // @ts-ignore
  if (typeof expect === "function") define("codeagent canary @NONCE@ @INDEX@ expect@SUFFIX@", async function () {
    record(await load("fs"), "expect");
    // @ts-ignore
    expect("@SECRET@").toBe("@SECRET@!");
  });
})();
