#pragma once
// shardcheck's exit codes, one per way a run can end (README: "Exit codes").
namespace shardcheck::prop::exit_code {

inline constexpr int pass = 0;    // every property held on every case
inline constexpr int failed = 1;  // a property failed (the replay line is printed)
inline constexpr int usage = 2;   // bad usage: an option, a case line, a limit, a file that cannot
                                  // be read or written (a full disk), a run that checks nothing
inline constexpr int watchdog = 3;       // the watchdog ended a case that ran past --case-timeout
inline constexpr int runtime = 4;        // an MPI or runtime error outside any property
inline constexpr int crashed = 5;        // a rank crashed (SIGSEGV, SIGBUS, SIGFPE, SIGABRT)
inline constexpr int aborted = 6;        // a kernel or its library called MPI_Abort
inline constexpr int not_caught = 7;     // a mutant cell no property caught (never acted, or
                                         // acted and every property held); nothing failed
inline constexpr int interrupted = 130;  // SIGINT (128 + 2)
inline constexpr int terminated = 143;   // SIGTERM (128 + 15)
inline constexpr int hung_up = 129;      // SIGHUP (128 + 1)
// Not shardcheck's own: a rank killed by SIGKILL (the kernel's OOM killer, a job's time limit,
// `kill -9`) ends with no last words; mpirun, or the shell running the rank, reports 128 + 9.
inline constexpr int killed = 137;

}  // namespace shardcheck::prop::exit_code
