// The io_uring part of the factory (built with liburing; open_uring_stub.cpp otherwise).
#include "factory_parts.hpp"
#include "uring_driver.hpp"

namespace tern::drv::factory {

const bool kUringBuilt = true;

std::unique_ptr<rt::Driver> open_uring(const rt::DriverSpec& spec, std::string& error) {
  UringOptions uo;
  uo.socket.bind = spec.bind;
  uo.socket.reuse_port = spec.reuse_port;
  uo.socket.receive_buffer = spec.receive_buffer;
  uo.socket.send_buffer = spec.send_buffer;
  uo.socket.burst = spec.burst;
  return open_best_driver(uo, error);
}

}  // namespace tern::drv::factory
