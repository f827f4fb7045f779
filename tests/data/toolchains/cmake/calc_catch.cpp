#include <catch2/catch_test_macros.hpp>
#include "calc.h"
TEST_CASE("adds") { REQUIRE(add(2, 3) == 5); }
