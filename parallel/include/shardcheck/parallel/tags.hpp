#pragma once
// Every MPI message tag shardcheck uses, in one place. Tags only need to differ between messages
// that may be in flight on the same communicator at once:
//   - the native collectives' messages (parallel/src/collectives/), blocking and started: a
//     started collective may run while a blocking one uses the same communicator, so the started
//     forms' tags are offset by `started_offset`;
//   - point-to-point messages of a kernel (`comm::start_send` / `comm::recv`): the caller's tag
//     0 ≤ t < p2p_limit, sent as p2p_base + t, above every collective's tag.
namespace shardcheck::par::tags {

inline constexpr int ring_gather = 11;
inline constexpr int ring_reduce = 12;
inline constexpr int fold = 21;      // recursive doubling: the ranks above the power of two fold in
inline constexpr int unfold = 22;    // … and receive the result back
inline constexpr int doubling = 23;  // recursive doubling's exchanges
inline constexpr int broadcast = 31;
inline constexpr int all_to_all = 41;
inline constexpr int tree_reduce = 51;     // tree all-reduce: partial sums up to rank 0
inline constexpr int tree_broadcast = 52;  // … and the total back down
inline constexpr int started_offset = 100;

inline constexpr int p2p_base = 1 << 13;
inline constexpr int p2p_limit = 1 << 14;

}  // namespace shardcheck::par::tags
