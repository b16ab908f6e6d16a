#include <cmath>
#include "core.hpp"

namespace rp {
namespace {

class Circle final : public Shape {
    double r;
public:
    explicit Circle(double r) : r(r) {}
    double area() const override { return M_PI * r * r; }
    double perimeter() const override { return 2 * M_PI * r; }
};

class Rect final : public Shape {
    double w, h;
public:
    Rect(double w, double h) : w(w), h(h) {}
    double area() const override { return w * h; }
    double perimeter() const override { return 2 * (w + h); }
};

class Polygon final : public Shape {  // regular polygon
    int sides;
    double radius;
public:
    Polygon(int sides, double radius) : sides(sides), radius(radius) {}
    double area() const override { return 0.5 * sides * radius * radius * std::sin(2 * M_PI / sides); }
    double perimeter() const override { return 2 * sides * radius * std::sin(M_PI / sides); }
};

}  // namespace

std::vector<std::unique_ptr<Shape>> make_shapes(size_t n, Rng &rng) {
    std::vector<std::unique_ptr<Shape>> shapes;
    shapes.reserve(n);
    for (size_t i = 0; i < n; i++) {
        switch (rng.next() % 3) {
        case 0: shapes.push_back(std::make_unique<Circle>(rng.unit() * 3)); break;
        case 1: shapes.push_back(std::make_unique<Rect>(rng.unit() * 4, rng.unit() * 2)); break;
        default: shapes.push_back(std::make_unique<Polygon>(3 + int(rng.next() % 9), rng.unit())); break;
        }
    }
    return shapes;
}

double total_area(const std::vector<std::unique_ptr<Shape>> &shapes) {
    double sum = 0;
    for (const auto &s : shapes) sum += s->area();
    return sum;
}

double total_perimeter(const std::vector<std::unique_ptr<Shape>> &shapes) {
    double sum = 0;
    for (const auto &s : shapes) sum += s->perimeter();
    return sum;
}

}  // namespace rp
