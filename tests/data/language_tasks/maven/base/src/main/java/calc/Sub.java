package calc;

public class Sub {
    public static int sub(int a, int b) {
        return a + b;
    }
}
