#pragma once
namespace mini {
class Kernel {
public:
    explicit Kernel(unsigned long seed) : seed_(seed) {}
    unsigned long run(unsigned long n) const;
private:
    unsigned long seed_;
};
}  // namespace mini
