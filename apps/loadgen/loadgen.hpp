// tern-loadgen's run: connect every client, drive the rooms, measure every relayed copy.
#pragma once

#include "options.hpp"

namespace tern::loadgen {

// Returns the process exit status (kExitOk / kExitFailure).
int run(const Config& config);

}  // namespace tern::loadgen
