// The factory's optional parts: one source file each for a driver that may be missing from a
// build, and a stub in its place when it is (meson picks which), so neither the factory nor
// its callers carry #ifs for them.
#pragma once

#include "driver.hpp"

#include <memory>
#include <string>

namespace tern::drv::factory {

extern const bool kUringBuilt;
extern const bool kDpdkBuilt;

// io_uring with the spec's socket settings, falling back to the socket driver (one line on
// stderr) when the ring cannot be set up; the stub runs the socket driver and says so.
std::unique_ptr<rt::Driver> open_uring(const rt::DriverSpec& spec, std::string& error);
// Queue pair spec.queue of the port dpdk_init set up; the stub refuses.
std::unique_ptr<rt::Driver> open_dpdk(const rt::DriverSpec& spec, std::string& error);
// The socket driver with the spec's settings.
std::unique_ptr<rt::Driver> open_socket(const rt::DriverSpec& spec, std::string& error);

}  // namespace tern::drv::factory
