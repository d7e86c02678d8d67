#include "shardcheck/parallel/placement.hpp"

#include <charconv>
#include <optional>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::par {

namespace {
// The whole of s as a non-negative integer, or -1.
std::int64_t whole_number(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v >= 0 ? v : -1;
}

// "BC(1,nb=4,src=2)" → BC(1, 4, 2); nullopt when s is not of that form.
std::optional<placement> parse_cyclic(std::string_view s) {
  if (s.size() < 9 || (s.substr(0, 5) != "BC(0," && s.substr(0, 5) != "BC(1,")) return std::nullopt;
  if (s.back() != ')' || s.substr(5, 3) != "nb=") return std::nullopt;
  const int d = s[3] - '0';
  std::string_view rest = s.substr(8, s.size() - 9);  // "4" or "4,src=2"
  std::int64_t src = 0;
  if (const std::size_t comma = rest.find(','); comma != rest.npos) {
    if (rest.substr(comma + 1, 4) != "src=") return std::nullopt;
    src = whole_number(rest.substr(comma + 5));
    rest = rest.substr(0, comma);
  }
  const std::int64_t nb = whole_number(rest);
  if (nb < 1 || src < 0 || src > 1 << 20) return std::nullopt;
  return placement::BC(d, nb, static_cast<int>(src));
}

// The first comma at or after pos outside parentheses ("BC(0,nb=4),R": 10), or npos.
std::size_t top_level_comma(std::string_view s, std::size_t pos) {
  int depth = 0;
  for (std::size_t i = pos; i < s.size(); ++i) {
    depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
    if (s[i] == ',' && depth == 0) return i;
  }
  return s.npos;
}
}  // namespace

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
    case kind::cyclic: {
      std::string out = "BC(" + std::to_string(dim) + ",nb=" + std::to_string(nb);
      if (src != 0) out += ",src=" + std::to_string(src);
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
  if (const auto bc = parse_cyclic(s)) return *bc;
  throw invalid_problem("placement: '" + std::string(s) +
                        "' is not one of R, P, S(0), S(1), On(r), BC(d,nb=b), BC(d,nb=b,src=s)");
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
    const std::size_t comma = top_level_comma(s, pos);
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
