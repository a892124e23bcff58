// The proxy loop: one thread, one epoll set over the listening socket and one connected
// upstream socket per client flow; received datagrams are planned (impair.hpp) into a min-heap
// of preallocated buffers and sent when due. Why not the rt::Driver: apps/netem/README.md.
#pragma once

#include "options.hpp"

namespace tern::netem {

// Runs until SIGINT/SIGTERM or the configured duration; prints the listening address first
// (stdout), a progress line each second (stderr) and a summary at the end (stdout).
// kExitFailure when a socket cannot be set up.
int run(const Config& config);

}  // namespace tern::netem
