#include "common/dpdk_file.hpp"

#include "dpdk_config.hpp"

namespace tern::app {

bool read_dpdk_file(const std::string& path, drv::DpdkConfig& out, std::string& error) {
  return drv::load_dpdk_config(path, out, error);
}

}  // namespace tern::app
