#include "shardcheck/properties/generators.hpp"

#include <algorithm>

#include "shardcheck/reference/mixed.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::prop {

rc::Gen<std::int64_t> dimension(int p) {
  return rc::gen::weightedOneOf<std::int64_t>(
      {{4, rc::gen::inRange<std::int64_t>(0, 65)},
       {2, rc::gen::element<std::int64_t>(0, 1, 2, 3, 5, 7, 11, 13, 31, 61, 64)},
       {1, rc::gen::inRange<std::int64_t>(0, p + 1)},
       {1, rc::gen::inRange<std::int64_t>(65, 200)}});
}

rc::Gen<std::int64_t> large_dimension(std::int64_t max) {
  return rc::gen::exec([max] {
    const int top = 63 - __builtin_clzll(static_cast<unsigned long long>(max));  // ⌊log2 max⌋
    const int e = *rc::gen::inRange(6, top + 1);                                 // 2^6 = 64
    const std::int64_t lo = std::max<std::int64_t>(65, std::int64_t{1} << e);
    const std::int64_t hi = std::min(max, (std::int64_t{1} << (e + 1)) - 1);
    return *rc::gen::inRange<std::int64_t>(std::min(lo, hi), hi + 1);
  });
}

std::int64_t small_beside(std::int64_t big) {
  std::int64_t s = 1;
  while ((s + 1) * (s + 1) * big <= large_flops && s < 64) ++s;
  return s;
}

rc::Gen<par::partition> partition_of(std::int64_t n, int parts) {
  return rc::gen::exec([n, parts] {
    // A shrink replaying a recipe can ask for 0 parts (parts − 1 cuts would then be 2⁶⁴ − 1
    // elements: selftest ran out of memory so) or more than any case may have.
    if (parts < 1 || parts > par::max_parts)
      throw invalid_problem("a split into " + std::to_string(parts) + " parts");
    if (*rc::gen::inRange(0, 3) == 0) return par::partition::balanced(n, parts);
    auto cuts = *rc::gen::container<std::vector<std::int64_t>>(
        static_cast<std::size_t>(parts - 1), rc::gen::inRange<std::int64_t>(0, n + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::int64_t> sizes;
    std::int64_t at = 0;
    for (auto cut : cuts) {
      sizes.push_back(cut - at);
      at = cut;
    }
    sizes.push_back(n - at);
    return par::partition(std::move(sizes));
  });
}

rc::Gen<std::int64_t> parameter(const par::param_spec& ps) {
  if (ps.max - ps.min <= 64) return rc::gen::inRange(ps.min, ps.max + 1);
  // A wide range (a size in bytes): its ends and default, small values, and every scale evenly
  // (a uniform draw would almost always land in the top binade).
  const auto min = ps.min, max = ps.max;
  return rc::gen::weightedOneOf<std::int64_t>(
      {{1, rc::gen::element(min, max, ps.fallback)},
       {2, rc::gen::inRange<std::int64_t>(min, min + 65)},
       {4, rc::gen::exec([min, max] {
          const int bits = 64 - __builtin_clzll(static_cast<unsigned long long>(max - min));
          const int e = *rc::gen::inRange(0, bits);
          return *rc::gen::inRange<std::int64_t>(min,
                                                 std::min(max, min + (std::int64_t{1} << e)) + 1);
        })}});
}

rc::Gen<std::int64_t> divisor_of(int p) {
  std::vector<std::int64_t> divisors;
  for (int d = 1; d <= p; ++d)
    if (p % d == 0) divisors.push_back(d);
  return rc::gen::elementOf(divisors);
}

namespace {
// The kernel's modes other than m (m itself if it has no other).
std::vector<value_mode> other_modes(const par::kernel_info& info, value_mode m) {
  std::vector<value_mode> out;
  for (value_mode v : info.modes)
    if (v != m) out.push_back(v);
  if (out.empty()) out.push_back(m);
  return out;
}
// A bf16 / f16 case: one of the kernel's declared policies for its dtype, and a mode the dtype
// holds (f16 overflows wide and cancel data; exact mode's sums stay exact to ref::exact_limit).
void draw_policy(const par::kernel_info& info, par::run_case& c) {
  std::vector<precision> declared;
  for (const precision& pol : info.policies)
    if (info.supports(c.prob.type, pol)) declared.push_back(pol);
  if (declared.empty()) return;  // complete_and_validate names the missing policy
  c.policy = *rc::gen::elementOf(declared);
  const bool overflows =
      c.prob.type == dtype::f16 && (c.mode == value_mode::wide || c.mode == value_mode::cancel);
  const bool rounds =
      c.mode == value_mode::exact &&
      (c.prob.layers() > 1
           ? !ref::exact_stack_problem({c.prob.layout, c.prob.widths(), c.prob.act}, c.prob.M,
                                       c.prob.type)
                  .empty()
           : std::max({c.prob.M, c.prob.N, c.prob.K}) > ref::exact_limit(c.prob.type));
  if ((overflows || rounds) && info.supports(value_mode::uniform)) c.mode = value_mode::uniform;
}
}  // namespace

namespace {
// A drawn case and, if the kernel declines it, why (case_declined's reason).
struct drawn {
  par::run_case c;
  std::string declined;
};
rc::Gen<drawn> draw_case(const par::kernel& s, int max_p, const case_pins& pins, bool allow_large);

// The first case of draw_case(allow_large) that s takes, at most max_declined_in_a_row draws; each
// declined draw counted in `tally`. A kernel that has declined every one of its first
// max_declined_in_all draws (with these ranks and pins) fails at once.
par::run_case accepted(const par::kernel& s, int max_p, const case_pins& pins, bool allow_large,
                       draw_tally* tally) {
  for (int attempt = 1;; ++attempt) {
    if (tally != nullptr && tally->accepted == 0 && tally->declined >= max_declined_in_all)
      throw rc::GenerationFailure(s.name() + " declined all " + std::to_string(tally->declined) +
                                  " cases drawn (e.g. " + tally->example + ")");
    drawn d = *draw_case(s, max_p, pins, allow_large);
    if (d.declined.empty()) {
      if (tally != nullptr) ++tally->accepted;
      return std::move(d.c);
    }
    if (tally != nullptr && tally->declined++ == 0) tally->example = d.declined;
    if (attempt == max_declined_in_a_row)
      throw rc::GenerationFailure(s.name() + " declined " + std::to_string(attempt) +
                                  " cases drawn in a row (the last: " + d.declined + ")");
  }
}
}  // namespace

rc::Gen<par::run_case> case_for(const par::kernel& s, int max_p, const case_pins& pins,
                                draw_tally* tally) {
  // At full size from the first case: worker counts and shapes are drawn evenly over their whole
  // ranges (RapidCheck would otherwise start every run with tiny ranges); edge cases come from
  // the weighted choices and from shrinking.
  return rc::gen::resize(
      100, rc::gen::exec([&s, max_p, pins, tally] {
        // A large case that would issue more than large_collectives collectives and messages on
        // rank 0 (sharded_weights at K = 22,290 with 1-row buckets: 22,290 gathers; 41 s) is drawn
        // again at the usual sizes.
        par::run_case c = accepted(s, max_p, pins, true, tally);
        if (c.prob.M + c.prob.N + c.prob.K <= 600) return c;
        try {
          const par::claims cl = s.cost(c, std::vector<int>(s.mesh_dims(c).size(), 0));
          if (!cl.collectives ||
              static_cast<std::int64_t>(cl.collectives->forward.size() +
                                        cl.collectives->backward.size()) <= large_collectives)
            return c;
        } catch (const std::exception&) {
          return c;  // the case itself says what is wrong when it runs
        }
        return accepted(s, max_p, pins, false, tally);
      }));
}

namespace {

rc::Gen<drawn> draw_case(const par::kernel& s, int max_p, const case_pins& pins, bool allow_large) {
  // pins by value: RapidCheck keeps this generator's shrinkable and runs the lambda again while
  // shrinking, after the caller's frame (and the pins it was given) may be gone.
  return rc::gen::exec([&s, max_p, pins, allow_large] {
    const par::kernel_info& info = s.info();
    par::run_case c;
    c.strategy = info.name;
    // p is a multiple of the pinned mesh factors.
    int step = 1;
    for (const par::param_spec& ps : info.params)
      if (const auto pin = pins.params.find(ps.name); ps.divides_p && pin != pins.params.end())
        step *= static_cast<int>(std::max<std::int64_t>(pin->second, 1));
    if (!pins.p && step > max_p)
      throw invalid_problem(info.name + ": the pinned mesh factors need " + std::to_string(step) +
                            " workers; only " + std::to_string(max_p) + " ranks were launched");
    c.p = pins.p ? *pins.p : step * *rc::gen::inRange(1, max_p / step + 1);
    const auto draw = [&](const std::optional<dim_range>& pin) {
      return pin ? *rc::gen::inRange<std::int64_t>(pin->lo, pin->hi + 1) : *dimension(c.p);
    };
    c.prob.M = draw(pins.m);
    c.prob.N = draw(pins.n);
    c.prob.K = draw(pins.k);
    const bool pinned_shape = pins.m || pins.n || pins.k;
    // Now and then one dimension large, the others (hidden widths too) small beside it.
    std::int64_t cap = -1;
    if (allow_large && !pinned_shape && *rc::gen::inRange(0, large_one_in) == 0) {
      std::int64_t* dims[3] = {&c.prob.M, &c.prob.N, &c.prob.K};
      const int which = *rc::gen::inRange(0, 3);
      const std::int64_t big = *large_dimension(which == 2 ? large_k : large_mn);
      cap = small_beside(big);
      for (int d = 0; d < 3; ++d)
        *dims[d] = d == which ? big : *rc::gen::inRange<std::int64_t>(0, cap + 1);
    }
    // Only what the kernel supports.
    c.prob.type = *rc::gen::elementOf(info.dtypes);
    c.prob.layout = *rc::gen::elementOf(info.layouts);
    c.mode = *rc::gen::elementOf(info.modes);
    // Hidden widths and the activation only for strategies that run stacks.
    if (info.max_layers > 1) {
      const auto layers = *rc::gen::inRange(info.min_layers, info.max_layers + 1);
      for (std::size_t l = 1; l < layers; ++l)
        c.prob.hidden.push_back(cap < 0 ? *dimension(c.p)
                                        : *rc::gen::inRange<std::int64_t>(0, cap + 1));
      if (layers > 1) c.prob.act = *rc::gen::element(activation::identity, activation::relu);
      // Exact mode in f32 can round a stack's wider sums: such shapes run in f64, and deep
      // wide stacks that would round even there run on uniform data.
      const auto exact_problem = [&] {
        return ref::exact_stack_problem({c.prob.layout, c.prob.widths(), c.prob.act}, c.prob.M,
                                        c.prob.type);
      };
      if (c.mode == value_mode::exact && !exact_problem().empty() && info.supports(dtype::f64) &&
          !is_storage16(c.prob.type))
        c.prob.type = dtype::f64;
      if (c.mode == value_mode::exact && !exact_problem().empty() && !is_storage16(c.prob.type))
        c.mode = *rc::gen::elementOf(other_modes(info, value_mode::exact));
    }
    // A bf16 / f16 case's policy, once its shape (hidden widths too) is known.
    if (is_storage16(c.prob.type)) draw_policy(info, c);
    c.seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 20);
    c.check = pins.check;
    // Unpinned: mpi, native, or native with the tree all-reduce
    // (backend=native:all_reduce=tree).
    if (pins.backend) {
      c.backend = *pins.backend;
    } else {
      c.backend = *rc::gen::element(par::backend::mpi, par::backend::native);
      if (c.backend.kind == par::backend::native && *rc::gen::element(false, true))
        c.backend.algorithms.set(par::collective::all_reduce, par::algorithm::tree);
    }
    // The mesh factors: pinned ones first set aside (p is a multiple of them), then the others
    // drawn in order from what is left, so that together they factorise p.
    int unfactored = c.p;
    for (const par::param_spec& ps : info.params)
      if (const auto pin = pins.params.find(ps.name); ps.divides_p && pin != pins.params.end())
        unfactored /= static_cast<int>(std::max<std::int64_t>(pin->second, 1));
    for (const par::param_spec& ps : info.params) {
      if (const auto pin = pins.params.find(ps.name); pin != pins.params.end()) {
        c.params[ps.name] = pin->second;
      } else if (ps.divides_p) {
        const std::int64_t d = *divisor_of(unfactored);
        c.params[ps.name] = d;
        unfactored /= static_cast<int>(d);
      } else {
        c.params[ps.name] = *parameter(ps);
      }
    }
    // The splits the kernel's library picks are its own; the others drawn.
    const std::map<std::string, par::partition> chosen = s.library_partitions(c);
    for (const par::split& sp : par::splits_of(s, c))
      if (!chosen.contains(sp.key)) c.parts.emplace(sp.key, *partition_of(sp.length, sp.parts));
    drawn out{std::move(c), {}};
    try {
      par::complete_and_validate(s, out.c);
    } catch (const par::case_declined& e) {
      out.declined = e.reason();
    } catch (const invalid_problem& e) {
      // A pinned shape the drawn rest cannot take (exact mode that would round at that size):
      // drawn again, like a declined case. Unpinned, the generators never draw one.
      if (!pinned_shape) throw;
      out.declined = e.what();
    }
    return out;
  });
}

}  // namespace

}  // namespace shardcheck::prop
