// A [dpdk] TOML table into a drv::DpdkConfig: drivers/dpdk's reader (dpdk_config) when toml++
// is found (dpdk_file.cpp), a refusal otherwise (dpdk_file_off.cpp). Only with the DPDK driver.
#pragma once

#include "dpdk_driver.hpp"

#include <string>

namespace tern::app {

bool read_dpdk_file(const std::string& path, drv::DpdkConfig& out, std::string& error);

}  // namespace tern::app
