int sub(int a, int b);
