package modern;

public final class Calc {
    public static int times(int a, int b) {
        return a * b;
    }
}
