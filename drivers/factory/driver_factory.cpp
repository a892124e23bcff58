// rt::open_driver: every driver the engine runs is opened here.
#include "driver_factory.hpp"

#include "factory_parts.hpp"
#include "sim_network.hpp"
#include "socket_driver.hpp"

#include <stdexcept>

namespace tern::drv {

namespace factory {

std::unique_ptr<rt::Driver> open_socket(const rt::DriverSpec& spec, std::string& error) {
  SocketOptions so;
  so.bind = spec.bind;
  so.reuse_port = spec.reuse_port;
  so.receive_buffer = spec.receive_buffer;
  so.send_buffer = spec.send_buffer;
  so.burst = spec.burst;
  return open_socket_driver(so, error);
}

namespace {

std::unique_ptr<rt::Driver> open_sim(const rt::DriverSpec& spec, std::string& error) {
  auto* net = dynamic_cast<SimNetwork*>(spec.sim_network);
  if (net == nullptr) {
    error = "the sim driver needs a network (DriverSpec::sim_network)";
    return nullptr;
  }
  try {
    return net->attach(spec.bind);
  } catch (const std::exception& e) {
    // attach() refuses an address that is taken.
    error = e.what();
    return nullptr;
  }
}

}  // namespace
}  // namespace factory

bool driver_built(rt::DriverKind kind) {
  switch (kind) {
    case rt::DriverKind::socket:
    case rt::DriverKind::sim: return true;
    case rt::DriverKind::uring: return factory::kUringBuilt;
    case rt::DriverKind::dpdk: return factory::kDpdkBuilt;
  }
  return false;
}

const char* driver_kind_name(rt::DriverKind kind) {
  switch (kind) {
    case rt::DriverKind::socket: return "socket";
    case rt::DriverKind::uring: return "uring";
    case rt::DriverKind::dpdk: return "dpdk";
    case rt::DriverKind::sim: return "sim";
  }
  return "?";
}

std::optional<rt::DriverKind> parse_driver_kind(std::string_view name) {
  for (const rt::DriverKind k :
       {rt::DriverKind::socket, rt::DriverKind::uring, rt::DriverKind::dpdk, rt::DriverKind::sim}) {
    if (name == driver_kind_name(k)) return k;
  }
  return std::nullopt;
}

}  // namespace tern::drv

namespace tern::rt {

std::unique_ptr<Driver> open_driver(const DriverSpec& spec, std::string& error) {
  switch (spec.kind) {
    case DriverKind::socket: return drv::factory::open_socket(spec, error);
    case DriverKind::uring: return drv::factory::open_uring(spec, error);
    case DriverKind::dpdk: return drv::factory::open_dpdk(spec, error);
    case DriverKind::sim: return drv::factory::open_sim(spec, error);
  }
  error = "unknown driver kind";
  return nullptr;
}

}  // namespace tern::rt
