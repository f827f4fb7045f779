#include "sub.h"

int sub(int a, int b) { return a + b; }
