#include "common/dpdk_file.hpp"

namespace tern::app {

bool read_dpdk_file(const std::string&, drv::DpdkConfig&, std::string& error) {
  error = "--dpdk-config: this build has no TOML support (toml++ not found)";
  return false;
}

}  // namespace tern::app
