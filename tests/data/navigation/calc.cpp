#include <vector>
namespace calc {
class Calc {
 public:
  Calc() : total_(0) {}
  int add(int n) { total_ += n; return total_; }
  int sub(int n);
 private:
  int total_;
};
int Calc::sub(int n) { total_ -= n; return total_; }
template <typename T> T twice(T x) { return x * 2; }
struct Point { int x, y; };
}
int main() { calc::Calc c; return c.add(1); }
