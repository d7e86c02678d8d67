#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.hpp"
#include "shardcheck/parallel/plan.hpp"

namespace shardcheck::commands {

namespace {

// The case `list` shows a kernel's placements on: p = 1 and M = N = K = 1, or else the smallest
// of a few the kernel takes (it may decline the first: a minimum size, a square grid of 4).
par::run_case listing_case(const par::kernel& s) {
  for (int p = 1; p <= 16; ++p)
    for (const std::int64_t n : {1, 2, 4, 8, 16, 64, 256}) {
      par::run_case d = default_case(s, p, n, n, n);
      try {
        par::complete_and_validate(s, d);
        return d;
      } catch (const par::case_declined&) {
        continue;
      }
    }
  throw invalid_problem(s.name() + " declines every case of p ≤ 16 and M = N = K ≤ 256");
}

int do_list(const catalogue& cat) {
  for (const auto* s : cat.normal()) {
    const par::run_case c = listing_case(*s);
    const par::kernel_info& info = s->info();
    const par::case_plan plan = par::plan_of(*s, c, par::coords_of(0, s->mesh_dims(c)));
    std::printf("%s\n  %s\n  placements (%zu-axis mesh, defaults): %s\n", info.name.c_str(),
                info.summary.c_str(), plan.dims.size(), placements_line(plan).c_str());
    std::printf("  layers %zu", info.min_layers);
    if (info.max_layers != info.min_layers) std::printf("-%zu", info.max_layers);
    std::printf("; dtypes %s; layouts %s; modes %s%s\n", join(info.dtypes).c_str(),
                join(info.layouts).c_str(), join(info.modes).c_str(),
                info.uses_collectives ? "" : "; point-to-point only");
    if (!info.policies.empty()) {
      std::string pols;
      for (const precision& pol : info.policies)
        pols += (pols.empty() ? "" : ", ") + to_string(pol);
      std::printf("  precision policies (bf16, f16): %s\n", pols.c_str());
    }
    for (const auto& ps : info.params)
      std::printf("  parameter %s in [%lld, %lld], default %lld: %s\n", ps.name.c_str(),
                  static_cast<long long>(ps.min), static_cast<long long>(ps.max),
                  static_cast<long long>(ps.fallback), ps.help.c_str());
    if (const std::string takes = par::to_string(info.takes); !takes.empty())
      std::printf("  takes only: %s\n", takes.c_str());
    if (!info.deterministic) std::printf("  not deterministic by design\n");
  }
  return 0;
}

}  // namespace

runner::command list(CLI::App& app, const catalogue& cat) {
  return {app.add_subcommand("list", "List the strategies with their placements"),
          [] { return false; }, [&cat] { return do_list(cat); }};
}

}  // namespace shardcheck::commands
