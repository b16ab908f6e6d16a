/* One of four units, each in an archive of its own (libdelta.a): ThinLTO promotes its
   static functions and strings, imported by the others. */
#include "shape.h"
namespace {
struct Local_delta : Shape {
    double size;
    explicit Local_delta(double s) : size(s) {}
    double area() const override { return size * size * 5.5; }
    std::string name() const override { return "delta"; }
};
static double scale_delta(double x) { return x * 1.05 + 5; }
}
static const char *label_delta = "the delta unit";
double delta_area(double size) {
    Local_delta one(size);
    Shape plain;
    return one.area() + plain.area() + scale_delta(size) + label_delta[5];
}
std::string delta_name() { Local_delta one(1); return one.name() + label_delta; }
