#pragma once
// The ledger: every collective a strategy issues, as this rank saw it. The cost model predicts the
// same entries, and a property compares the two exactly.
//
// Bytes are the collective's logical payload for this rank, whatever algorithm runs underneath:
//   all-gather(v)      sent = own part,            received = total − own part
//   all-reduce         sent = n,                   received = n
//   reduce-scatter(v)  sent = total − own part,    received = own part
//   broadcast          root: sent = n, received 0; others: sent 0, received = n
//   all-to-all(v)      sent = Σ_{j≠me} send[j],    received = Σ_{j≠me} recv[j]
// On one rank nothing leaves or arrives: both are 0.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::par {

enum class collective { all_gather, all_reduce, reduce_scatter, broadcast, all_to_all, barrier };
enum class phase { forward, backward };

[[nodiscard]] std::string_view to_string(collective c);
[[nodiscard]] std::string_view to_string(phase p);

struct ledger_entry {
  phase when = phase::forward;
  collective kind = collective::barrier;
  int axis = 0;               // mesh axis of the communicator (0 on a one-axis mesh)
  std::size_t elem_bytes = 0;
  std::int64_t elements = 0;  // elements in this rank's result buffer
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  int root = -1;              // broadcast only

  friend bool operator==(const ledger_entry&, const ledger_entry&) = default;
};

[[nodiscard]] std::string to_string(const ledger_entry& e);

// The entries that one call of each collective makes on rank `me` of `p`; the communicator records
// them and cost models predict with them.
[[nodiscard]] ledger_entry all_gather_entry(std::span<const std::int64_t> counts, int me,
                                            std::size_t elem_bytes);
[[nodiscard]] ledger_entry all_reduce_entry(std::int64_t n, int p, std::size_t elem_bytes);
[[nodiscard]] ledger_entry reduce_scatter_entry(std::span<const std::int64_t> counts, int me,
                                                std::size_t elem_bytes);
[[nodiscard]] ledger_entry broadcast_entry(std::int64_t n, int root, int me, int p,
                                           std::size_t elem_bytes);
[[nodiscard]] ledger_entry all_to_all_entry(std::span<const std::int64_t> send_counts,
                                            std::span<const std::int64_t> recv_counts, int me,
                                            std::size_t elem_bytes);

class ledger {
 public:
  ledger() { entries_.reserve(256); }
  void set_phase(phase p) { phase_ = p; }
  // Records e in the current phase. Never allocates below 256 entries, so it is invisible to the
  // memory meter in any realistic strategy.
  void record(ledger_entry e, int axis);
  void clear() { entries_.clear(); }
  // Room for n entries, so that recording them allocates nothing (callers reserve outside the
  // measured scope what the cost model predicts).
  void reserve(std::size_t n) { entries_.reserve(n); }
  [[nodiscard]] const std::vector<ledger_entry>& entries() const { return entries_; }

 private:
  phase phase_ = phase::forward;
  std::vector<ledger_entry> entries_;
};

}  // namespace shardcheck::par
