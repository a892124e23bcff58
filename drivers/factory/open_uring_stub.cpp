// The io_uring part of the factory in a build without liburing: the socket driver runs.
#include "factory_parts.hpp"

#include <cstdio>

namespace tern::drv::factory {

const bool kUringBuilt = false;

std::unique_ptr<rt::Driver> open_uring(const rt::DriverSpec& spec, std::string& error) {
  std::fprintf(stderr, "tern: shard %u: io_uring driver not built; using the socket driver\n",
               spec.queue);
  return open_socket(spec, error);
}

}  // namespace tern::drv::factory
