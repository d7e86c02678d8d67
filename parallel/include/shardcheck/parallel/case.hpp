#pragma once
// One case: everything a run depends on, with a one-line string form that replays it.
//   strategy=data_parallel p=3 M=7 N=5 K=4 dtype=f64 layout=out_in mode=exact seed=42
//   backend=native part.M=3,0,4 gather=1
// `backend=` (mpi or native) picks who runs the collectives; lines without it mean mpi. The native
// backend takes algorithm choices after a colon (ledger.hpp's algorithm_choice):
// `backend=native:all_reduce=tree`.
// `part.D=` gives the partition of problem dimension D (D@a on a mesh axis a > 0 of a many-axis
// mesh); `H=` the hidden widths of a stack of layers and `act=` its activation (both only for a
// stack: `strategy=… M=8 N=3 K=5 H=6 act=relu …`); `acc=` and `reduce=` the precision policy of
// a case stored in bf16 or f16 (`dtype=bf16 acc=f32 reduce=bf16`: sums formed in f32, partial sums
// rounded to bf16 and added in bf16 across ranks; both default to f32); any other key is a
// parameter of the strategy. `check=` (reference or projection; absent: auto) says how its outputs
// are judged (properties/verdict.hpp check_method_of).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/partition.hpp"
#include "shardcheck/reference/types.hpp"

namespace shardcheck::par {

// How a case's outputs are judged: element by element against a reference block (O(M·N·K)),
// by a random projection of each block (O(n²) per block), or `automatic`: the projection above
// a size (verdict.hpp). Printed and parsed as auto, reference, projection.
enum class check_method { automatic, reference, projection };
[[nodiscard]] std::string_view to_string(check_method m);
// Throws invalid_problem naming the accepted values.
[[nodiscard]] check_method parse_check_method(std::string_view s);

struct run_case {
  std::string strategy;
  int p = 1;
  problem prob;
  value_mode mode = value_mode::uniform;
  precision policy{};  // read only when prob.type is bf16 or f16
  std::uint64_t seed = 0;
  par::backend_spec backend;  // converts to par::backend; carries the native algorithm choices
  check_method check = check_method::automatic;  // printed as check= when not automatic
  std::map<std::string, partition> parts;
  std::map<std::string, std::int64_t> params;

  [[nodiscard]] std::string to_string() const;
  // Throws invalid_problem naming the offending token.
  [[nodiscard]] static run_case parse(std::string_view line);
  [[nodiscard]] std::int64_t param(const std::string& name) const;
  [[nodiscard]] const partition& part(const std::string& key) const;
};

}  // namespace shardcheck::par
