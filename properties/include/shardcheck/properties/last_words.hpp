#pragma once
// What a dying shardcheck process says, so that no run ends without a line that replays it.
//
//   A rank that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGABRT) writes, async-signal-safely,
//     shardcheck: rank 1 crashed (SIGSEGV) while running a case
//     replay: mpirun -n 2 --oversubscribe shardcheck verify --replay 'strategy=… p=2 …'
//     shrink: shardcheck shrink --replay 'strategy=… p=2 …' -- mpirun -n 2 --oversubscribe
//   and exits 5 (exit_codes.hpp). The lines were prepared before the case began; the second
//   shrinks the crashing case in fresh jobs, one per candidate.
//   A rank whose kernel (or a library it calls) calls MPI_Abort, in a program that links
//   shardcheck::pmpi, writes
//     shardcheck: rank 1 called MPI_Abort (error code 1) while running a case
//     replay: mpirun -n 2 --oversubscribe shardcheck verify --replay 'strategy=… p=2 …'
//   and the job ends with exit code 6, whatever the code passed (1, 2 and 255 would read as a
//   property failure, bad usage or anything). The leader's results files (--json, --junit) keep
//   what finished; when the leader is the rank that aborted they also hold the aborted case.
//   SIGINT, SIGTERM or SIGHUP: the leader prints the verdicts finished so far and the running
//   case's replay line, then every rank exits 128 + the signal: 130, 143 or 129. (mpirun turns
//   SIGINT and SIGTERM into SIGTERM for its ranks and itself exits 1; a rank signalled directly
//   exits with its own code.)
#include <functional>
#include <string>

namespace shardcheck::prop::last_words {

// Once per process, after MPI_Init: the handlers, and whether this rank is the one that speaks
// on an interrupt.
void install(int rank, bool leader);
// The replay line of the case this rank is about to run, and the command that shrinks it should
// it crash (driver.hpp shrink_command; empty: none); idle() when it is done.
void running(const std::string& replay, const std::string& shrink = {});
void idle();
// The leader's verdicts so far, as an interrupt prints them (the table, its failures).
void finished(std::string text);
// What a command that runs no case is doing, e.g. "compare: summa rep 3": a crash outside any
// case says "crashed (SIGSEGV) while compare: summa rep 3", an interrupt "interrupted (SIGTERM)
// while compare: summa rep 3". Empty: nothing said.
void doing(const std::string& what);
// Called once by the leader on an interrupt, before it prints: a command's partial result files
// are written here (complete: false).
void on_interrupt(std::function<void()> save);
// The command is done and its output final (complete flushes it): from now on an interrupt ends
// this rank at once with `code`, silently. That is mpirun's SIGTERM when another rank ended first
// with a failure's non-zero code (it ends the job's other ranks), which would otherwise report
// the finished run as interrupted.
void complete(int code);
// Runs when this rank's kernel calls MPI_Abort, after the message and before the job ends: the
// leader writes its results files with the running case as aborted (`what`: "rank 1 called
// MPI_Abort (error code 1)"; `replay`: its replay command, empty outside a case). Empty: nothing
// to write.
void on_abort(std::function<void(const std::string& what, const std::string& replay)> write);

}  // namespace shardcheck::prop::last_words
