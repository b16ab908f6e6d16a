#pragma once
#include <memory>
#include <string>
#define API __attribute__((visibility("default")))
struct API Shape {
  virtual ~Shape();
  virtual double area() const = 0;
  virtual std::string name() const = 0;
};
API std::unique_ptr<Shape> make_shape(const std::string& kind, double size);
API double total_area(int count);
