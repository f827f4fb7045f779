#include <stdio.h>

struct calc { int total; };
typedef struct { int x; } point;
enum op { ADD, SUB };

static int add(struct calc *c, int n) { c->total += n; return c->total; }
char *name(void) { return "calc"; }
int main(void) { struct calc c = {0}; printf("%d\n", add(&c, 2)); return 0; }
