/* One of four units, each in an archive of its own (libbeta.a): ThinLTO promotes its
   static functions and strings, imported by the others. */
#include "shape.h"
namespace {
struct Local_beta : Shape {
    double size;
    explicit Local_beta(double s) : size(s) {}
    double area() const override { return size * size * 4.5; }
    std::string name() const override { return "beta"; }
};
static double scale_beta(double x) { return x * 1.04 + 4; }
}
static const char *label_beta = "the beta unit";
double beta_area(double size) {
    Local_beta one(size);
    Shape plain;
    return one.area() + plain.area() + scale_beta(size) + label_beta[4];
}
std::string beta_name() { Local_beta one(1); return one.name() + label_beta; }
