package modern;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class TimesTest {
    @Test
    void multiplies() {
        assertEquals(6, Calc.times(2, 3));
    }
}
