// tern::drv driver factory: the one place that opens a driver by kind (drivers/factory).
//
// rt::open_driver, the factory itself, is declared by the runtime (engine/runtime/driver.hpp)
// and defined here, so the engine opens drivers without naming one. This header adds what
// programs need around it: which kinds this build has and their names on a command line.
//
//   rt::ShardGroupOptions o;
//   o.driver = *drv::parse_driver_kind("uring");
//   o.open_driver = rt::open_driver;
#pragma once

#include "driver.hpp"

#include <optional>
#include <string_view>

namespace tern::drv {

// False for uring without liburing and for dpdk without libdpdk (rt::open_driver then
// refuses the kind with a reason, except uring, which runs the socket driver instead).
bool driver_built(rt::DriverKind kind);

// "socket", "uring", "dpdk", "sim".
const char* driver_kind_name(rt::DriverKind kind);
std::optional<rt::DriverKind> parse_driver_kind(std::string_view name);

}  // namespace tern::drv
