#include "shapes.h"
#include <stdexcept>
Shape::~Shape() = default;
namespace {
struct Square : Shape {
  double s;
  explicit Square(double v) : s(v) {}
  double area() const override { return s * s; }
  std::string name() const override { return "square"; }
};
struct Circle : Shape {
  double r;
  explicit Circle(double v) : r(v) {}
  double area() const override { return 3.0 * r * r; }
  std::string name() const override { return "circle"; }
};
}  // namespace
std::unique_ptr<Shape> make_shape(const std::string& kind, double size) {
  if (kind == "square") return std::make_unique<Square>(size);
  if (kind == "circle") return std::make_unique<Circle>(size);
  throw std::invalid_argument("no shape " + kind);
}
