// routeplan: graph search, geometry with virtual dispatch, an iterative solver and
// text indexing -- templates, indirect calls and hot loops spread over several units.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rp {

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ULL + 1) {}
    uint64_t next() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
    double unit() { return double(next() >> 11) * 0x1.0p-53; }
};

// graph.cpp
struct Graph {
    struct Edge { uint32_t to; uint32_t weight; };
    std::vector<uint32_t> offsets;
    std::vector<Edge> edges;
    static Graph random_grid(uint32_t side, Rng &rng);
    uint32_t nodes() const { return uint32_t(offsets.size() - 1); }
};
std::vector<uint64_t> shortest_paths(const Graph &g, uint32_t source);
uint64_t bfs_reachable_sum(const Graph &g, uint32_t source, uint32_t max_depth);

// geometry.cpp
class Shape {
public:
    virtual ~Shape() = default;
    virtual double area() const = 0;
    virtual double perimeter() const = 0;
};
std::vector<std::unique_ptr<Shape>> make_shapes(size_t n, Rng &rng);
double total_area(const std::vector<std::unique_ptr<Shape>> &shapes);
double total_perimeter(const std::vector<std::unique_ptr<Shape>> &shapes);

// solver.cpp
double jacobi_heat(int n, int iterations);

// text.cpp
struct Index {
    std::vector<std::pair<std::string, uint32_t>> top(size_t k) const;
    void add_text(const std::string &text);
    size_t distinct() const;
    struct Impl;
    std::shared_ptr<Impl> impl;
    Index();
};
std::string synthesize_text(size_t words, Rng &rng);

}  // namespace rp
