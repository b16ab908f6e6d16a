#include "shapes.h"
#include <vector>
double total_area(int count) {
  std::vector<std::unique_ptr<Shape>> all;
  for (int i = 0; i < count; i++) all.push_back(make_shape(i % 2 ? "square" : "circle", i % 7));
  double sum = 0;
  for (auto& s : all) sum += s->area();
  return sum;
}
