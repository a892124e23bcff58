// The proxy loop: one thread, one epoll set over the listening socket and one connected
// upstream socket per client flow; received datagrams are planned (impair.hpp) into a min-heap
// of preallocated buffers and sent when due. Why not the rt::Driver: apps/netem/README.md.
#pragma once

#include "options.hpp"

#include <functional>
#include <string>

namespace tern::netem {

// Reads the configuration again (the same file and flags) for SIGHUP; false with a reason.
using Reload = std::function<bool(Config&, std::string&)>;

// Runs until SIGINT/SIGTERM or the configured duration; prints the listening address first
// (stdout), a progress line each second (stderr) and a summary at the end (stdout). On SIGHUP
// the impairments are replaced by what `reload` reads; a failed reload keeps the old ones.
// kExitFailure when a socket cannot be set up.
int run(const Config& config, Reload reload);

}  // namespace tern::netem
