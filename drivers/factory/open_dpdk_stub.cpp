// The DPDK part of the factory in a build without libdpdk: it refuses.
#include "factory_parts.hpp"

namespace tern::drv::factory {

const bool kDpdkBuilt = false;

std::unique_ptr<rt::Driver> open_dpdk(const rt::DriverSpec&, std::string& error) {
  error = "the dpdk driver is not built (libdpdk not found or -Ddpdk=disabled)";
  return nullptr;
}

}  // namespace tern::drv::factory
