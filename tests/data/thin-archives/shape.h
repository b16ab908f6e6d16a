/* A class whose virtual functions are all inline: every unit that makes one emits its
   vtable as a linkonce_odr copy, and the link keeps one of them. */
#include <string>
struct Shape {
    virtual ~Shape() {}
    virtual double area() const { return 0; }
    virtual std::string name() const { return "shape"; }
};
double area_of(int kind, double size);
std::string name_of(int kind);
double stretch(int kind, double size);
double bend(int kind, double size);
