// The one-line message for threads the system refused. std::thread throws std::system_error when a process or
// memory limit stops it; every part of the engine that starts threads (the thread pool, the expert cache's I/O
// threads) and the server report it in the same words.
#pragma once
#include <string>
#include <system_error>

namespace colibri {

// "cannot start <what>: <strerror> (a limit on processes or memory: ulimit -u, a cgroup's pids.max, ulimit -v)".
inline std::string thread_start_failure(const std::string& what, const std::system_error& e) {
    return "cannot start " + what + ": " + e.code().message() + " (a limit on processes or memory: ulimit -u, a cgroup's pids.max, ulimit -v)";
}

}  // namespace colibri
