#include "shardcheck/parallel/partition.hpp"

#include <algorithm>
#include <charconv>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::par {

partition::partition(std::vector<std::int64_t> sizes) : sizes_(std::move(sizes)) {
  if (sizes_.empty()) throw invalid_problem("partition: no parts");
  if (sizes_.size() > static_cast<std::size_t>(max_parts))
    throw invalid_problem("partition: " + std::to_string(sizes_.size()) +
                          " parts is above the limit of " + std::to_string(max_parts));
  offsets_.assign(1, 0);
  for (auto s : sizes_) {
    if (s < 0) throw invalid_problem("partition: negative part size " + std::to_string(s));
    offsets_.push_back(checked_add(offsets_.back(), s, "partition: the sum of the part sizes"));
  }
}

partition partition::balanced(std::int64_t n, int p) {
  if (p < 1) throw invalid_problem("partition: need at least one part");
  if (n < 0) throw invalid_problem("partition: negative length " + std::to_string(n));
  if (p > max_parts)
    throw invalid_problem("partition: " + std::to_string(p) + " parts is above the limit of " +
                          std::to_string(max_parts));
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(p), n / p);
  for (std::int64_t r = 0; r < n % p; ++r) ++sizes[static_cast<std::size_t>(r)];
  return partition(std::move(sizes));
}

partition partition::parse(std::string_view s) {
  std::vector<std::int64_t> sizes;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = s.find(',', pos);
    const std::string_view item =
        s.substr(pos, comma == std::string_view::npos ? s.npos : comma - pos);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      throw invalid_problem("partition: '" + std::string(s) +
                            "' is not a comma-separated list of part sizes like 3,0,4");
    if (sizes.size() == static_cast<std::size_t>(max_parts))
      throw invalid_problem("partition: more than " + std::to_string(max_parts) + " parts");
    sizes.push_back(v);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return partition(std::move(sizes));
}

std::int64_t partition::max_size() const { return *std::max_element(sizes_.begin(), sizes_.end()); }

int partition::owner(std::int64_t i) const {
  if (i < 0 || i >= length()) throw invalid_problem("partition: index out of range");
  const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), i);
  int r = static_cast<int>(it - offsets_.begin()) - 1;
  while (sizes_[static_cast<std::size_t>(r)] == 0) ++r;
  return r;
}

std::vector<std::int64_t> partition::scaled(std::int64_t scale) const {
  std::vector<std::int64_t> out(sizes_);
  for (auto& v : out) v = checked_mul(v, scale, "partition: a part's scaled size");
  return out;
}

std::string partition::to_string() const {
  std::string out;
  for (std::size_t r = 0; r < sizes_.size(); ++r) {
    if (r != 0) out += ',';
    out += std::to_string(sizes_[r]);
  }
  return out;
}

}  // namespace shardcheck::par
