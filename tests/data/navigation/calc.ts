export interface Named { name(): string; }
type Op = "add" | "sub";
enum Kind { A, B }
export abstract class Base { abstract run(): void; }
export class Calc extends Base implements Named {
  private total = 0;
  name(): string { return "calc"; }
  add(n: number): number { this.total += n; return this.total; }
  run(): void {}
}
export const make = (): Calc => new Calc();
function helper<T>(x: T): T { return x; }
