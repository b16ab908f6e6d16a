#include <algorithm>
#include <unordered_map>
#include "core.hpp"

namespace rp {

struct Index::Impl { std::unordered_map<std::string, uint32_t> counts; };

Index::Index() : impl(std::make_shared<Impl>()) {}

void Index::add_text(const std::string &text) {
    size_t i = 0;
    while (i < text.size()) {
        size_t j = text.find(' ', i);
        if (j == std::string::npos) j = text.size();
        if (j > i) impl->counts[text.substr(i, j - i)]++;
        i = j + 1;
    }
}

size_t Index::distinct() const { return impl->counts.size(); }

std::vector<std::pair<std::string, uint32_t>> Index::top(size_t k) const {
    std::vector<std::pair<std::string, uint32_t>> all(impl->counts.begin(), impl->counts.end());
    std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    if (all.size() > k) all.resize(k);
    return all;
}

std::string synthesize_text(size_t words, Rng &rng) {
    static const char *const syllables[] = {"ka", "lo", "mi", "ra", "tu", "ne", "so", "vi"};
    std::string out;
    out.reserve(words * 6);
    for (size_t w = 0; w < words; w++) {
        unsigned len = 1 + unsigned(rng.next() % 3);
        for (unsigned s = 0; s < len; s++) out += syllables[rng.next() % 8];
        out += ' ';
    }
    return out;
}

}  // namespace rp
