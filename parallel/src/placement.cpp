#include "shardcheck/parallel/placement.hpp"

#include <charconv>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::par {

std::string placement::to_string() const {
  switch (what) {
    case kind::replicate: return "R";
    case kind::partial: return "P";
    case kind::shard: return "S(" + std::to_string(dim) + ")";
    case kind::on: {
      std::string out = "On(";
      out += std::to_string(dim);
      out += ')';
      return out;
    }
  }
  return "?";
}

placement placement::parse(std::string_view s) {
  if (s == "R") return R();
  if (s == "P") return P();
  if (s == "S(0)") return S(0);
  if (s == "S(1)") return S(1);
  if (s.size() > 4 && s.substr(0, 3) == "On(" && s.back() == ')') {
    const std::string_view digits = s.substr(3, s.size() - 4);
    int r = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), r);
    if (ec == std::errc() && end == digits.data() + digits.size() && r >= 0) return On(r);
  }
  throw invalid_problem("placement: '" + std::string(s) +
                        "' is not one of R, P, S(0), S(1), On(r)");
}

std::string to_string(const layout& l) {
  std::string out;
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (i != 0) out += ',';
    out += l[i].to_string();
  }
  return out;
}

layout parse_layout(std::string_view s) {
  layout out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    out.push_back(placement::parse(s.substr(pos, comma == s.npos ? s.npos : comma - pos)));
    if (comma == s.npos) break;
    pos = comma + 1;
  }
  return out;
}

std::string_view to_string(tensor t) {
  switch (t) {
    case tensor::x: return "X";
    case tensor::w: return "W";
    case tensor::y: return "Y";
    case tensor::dy: return "dY";
    case tensor::dx: return "dX";
    case tensor::dw: return "dW";
  }
  return "?";
}

}  // namespace shardcheck::par
