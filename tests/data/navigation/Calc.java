package calc;

import java.util.List;

public class Calc {
    private int total;
    public Calc() { total = 0; }
    @Override
    public String toString() { return "Calc"; }
    public int add(int n) { total += n; return total; }
    interface Op { int apply(int a); }
    enum Kind { A, B }
    record Pair(int a, int b) {}
}
