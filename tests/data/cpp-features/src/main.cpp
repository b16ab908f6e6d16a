#include <stdexcept>
#include <typeinfo>
#include "common.h"
#include "shapes.h"
#include "util.h"
int main() {
  std::map<std::string, long> seen;
  double area = 0;
  for (int round = 0; round < 300; round++) area += total_area(200);
  auto s = make_shape("square", 3);
  bool thrown = false;
  try { make_shape("hexagon", 1); } catch (const std::invalid_argument&) { thrown = true; }
  seen[s->name()] = checksum(repeat(s->name(), 3));
  std::printf("%.1f %s %d %s %ld %d %d\n", area, typeid(*s).name(), thrown,
              s->name().c_str(), seen["square"], digits(seen["square"]),
              common_work(1000) + clamp_sum(std::vector<int>{5, 9, 11}, 20));
  return 0;
}
