export class Calc {
  constructor() { this.total = 0; }
  add(n) { this.total += n; return this.total; }
}
export function make() { return new Calc(); }
const double = (x) => x * 2;
function* gen() { yield 1; }
exports.sum = function sum(a, b) { return a + b; };
const api = { get: function () { return 1; }, put: (x) => x };
