/* One of four units, each in an archive of its own (libalpha.a): ThinLTO promotes its
   static functions and strings, imported by the others. */
#include "shape.h"
namespace {
struct Local_alpha : Shape {
    double size;
    explicit Local_alpha(double s) : size(s) {}
    double area() const override { return size * size * 5.5; }
    std::string name() const override { return "alpha"; }
};
static double scale_alpha(double x) { return x * 1.05 + 5; }
}
static const char *label_alpha = "the alpha unit";
double alpha_area(double size) {
    Local_alpha one(size);
    Shape plain;
    return one.area() + plain.area() + scale_alpha(size) + label_alpha[5];
}
std::string alpha_name() { Local_alpha one(1); return one.name() + label_alpha; }
