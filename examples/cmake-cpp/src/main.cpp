// routeplan driver: prints one line per kernel (the output a tuner checks).
// Usage: routeplan [scale]   (default 4: about a second at -O3)
#include <cstdio>
#include <cstdlib>
#include "core.hpp"

int main(int argc, char **argv) {
    int scale = argc > 1 ? std::atoi(argv[1]) : 4;
    if (scale < 1) scale = 1;
    rp::Rng rng(7);

    rp::Graph g = rp::Graph::random_grid(300, rng);
    uint64_t checksum = 0;
    for (int s = 0; s < 3 * scale; s++) {
        auto dist = rp::shortest_paths(g, uint32_t(s * 7919) % g.nodes());
        for (size_t v = 0; v < dist.size(); v += 97) checksum += dist[v];
    }
    std::printf("graph: %u nodes, %zu edges, dijkstra checksum %llu, bfs %llu\n", g.nodes(),
                g.edges.size(), (unsigned long long)checksum,
                (unsigned long long)rp::bfs_reachable_sum(g, 0, 50));

    auto shapes = rp::make_shapes(200000, rng);
    double area = 0, perimeter = 0;
    for (int round = 0; round < 5 * scale; round++) {
        area += rp::total_area(shapes);
        perimeter += rp::total_perimeter(shapes);
    }
    std::printf("shapes: area %.6f perimeter %.6f\n", area, perimeter);

    std::printf("heat: %.9f\n", rp::jacobi_heat(256, 200 * scale));

    rp::Index index;
    for (int round = 0; round < scale; round++) index.add_text(rp::synthesize_text(300000, rng));
    auto top = index.top(3);
    std::printf("text: %zu distinct;", index.distinct());
    for (const auto &[word, count] : top) std::printf(" %s=%u", word.c_str(), count);
    std::printf("\n");
    return 0;
}
