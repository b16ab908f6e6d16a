#include <algorithm>
#include <limits>
#include <queue>
#include "core.hpp"

namespace rp {

Graph Graph::random_grid(uint32_t side, Rng &rng) {
    Graph g;
    uint32_t n = side * side;
    g.offsets.reserve(n + 1);
    g.offsets.push_back(0);
    for (uint32_t v = 0; v < n; v++) {
        uint32_t r = v / side, c = v % side;
        auto add = [&](uint32_t to) { g.edges.push_back({to, uint32_t(1 + rng.next() % 100)}); };
        if (c + 1 < side) add(v + 1);
        if (c > 0) add(v - 1);
        if (r + 1 < side) add(v + side);
        if (r > 0) add(v - side);
        if (rng.next() % 8 == 0) add(uint32_t(rng.next() % n));  // shortcut
        g.offsets.push_back(uint32_t(g.edges.size()));
    }
    return g;
}

std::vector<uint64_t> shortest_paths(const Graph &g, uint32_t source) {
    const uint64_t inf = std::numeric_limits<uint64_t>::max();
    std::vector<uint64_t> dist(g.nodes(), inf);
    using Item = std::pair<uint64_t, uint32_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
    dist[source] = 0;
    heap.push({0, source});
    while (!heap.empty()) {
        auto [d, v] = heap.top();
        heap.pop();
        if (d != dist[v]) continue;
        for (uint32_t e = g.offsets[v]; e < g.offsets[v + 1]; e++) {
            const auto &edge = g.edges[e];
            uint64_t nd = d + edge.weight;
            if (nd < dist[edge.to]) { dist[edge.to] = nd; heap.push({nd, edge.to}); }
        }
    }
    return dist;
}

uint64_t bfs_reachable_sum(const Graph &g, uint32_t source, uint32_t max_depth) {
    std::vector<uint32_t> depth(g.nodes(), UINT32_MAX), frontier{source}, next;
    depth[source] = 0;
    uint64_t sum = 0;
    for (uint32_t level = 1; level <= max_depth && !frontier.empty(); level++) {
        next.clear();
        for (uint32_t v : frontier)
            for (uint32_t e = g.offsets[v]; e < g.offsets[v + 1]; e++) {
                uint32_t to = g.edges[e].to;
                if (depth[to] == UINT32_MAX) { depth[to] = level; next.push_back(to); sum += to; }
            }
        std::swap(frontier, next);
    }
    return sum;
}

}  // namespace rp
