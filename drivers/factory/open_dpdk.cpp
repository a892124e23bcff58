// The DPDK part of the factory (built with libdpdk; open_dpdk_stub.cpp otherwise).
#include "dpdk_driver.hpp"
#include "factory_parts.hpp"

namespace tern::drv::factory {

const bool kDpdkBuilt = true;

std::unique_ptr<rt::Driver> open_dpdk(const rt::DriverSpec& spec, std::string& error) {
  if (spec.bind.port == 0) {
    error = "the dpdk driver needs a UDP port (bind port 0)";
    return nullptr;
  }
  return open_dpdk_driver(spec.queue, spec.bind.port, error);
}

}  // namespace tern::drv::factory
