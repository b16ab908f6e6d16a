/* One of four units, each in an archive of its own (libgamma.a): ThinLTO promotes its
   static functions and strings, imported by the others. */
#include "shape.h"
namespace {
struct Local_gamma : Shape {
    double size;
    explicit Local_gamma(double s) : size(s) {}
    double area() const override { return size * size * 5.5; }
    std::string name() const override { return "gamma"; }
};
static double scale_gamma(double x) { return x * 1.05 + 5; }
}
static const char *label_gamma = "the gamma unit";
double gamma_area(double size) {
    Local_gamma one(size);
    Shape plain;
    return one.area() + plain.area() + scale_gamma(size) + label_gamma[5];
}
std::string gamma_name() { Local_gamma one(1); return one.name() + label_gamma; }
