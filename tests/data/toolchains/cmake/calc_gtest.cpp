#include <gtest/gtest.h>
#include "calc.h"
TEST(Calc, Adds) { EXPECT_EQ(add(2, 3), 5); }
