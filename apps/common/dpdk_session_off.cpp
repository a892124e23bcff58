// The apps' DPDK set-up in a build without the DPDK driver: every step refuses.
#include "common/dpdk_session.hpp"

namespace tern::app {

namespace {
constexpr const char* kNotBuilt = "--driver dpdk: this build has no DPDK driver";
}  // namespace

struct DpdkSession::Settings {};

DpdkSession::DpdkSession(std::string app) : app_(std::move(app)) {}
DpdkSession::~DpdkSession() = default;

bool DpdkSession::read_file(const std::string&, std::string& error) {
  error = kNotBuilt;
  return false;
}
bool DpdkSession::apply_flags(const DpdkOptions&, std::string& error) {
  error = kNotBuilt;
  return false;
}
bool DpdkSession::has_port() const { return false; }
bool DpdkSession::has_address() const { return false; }
bool DpdkSession::start(unsigned, std::string& error) {
  error = kNotBuilt;
  return false;
}
Endpoint DpdkSession::address(std::uint16_t) const { return Endpoint::v4(0, 0); }
bool DpdkSession::open(const DpdkOptions&, unsigned, std::string& error) {
  error = kNotBuilt;
  return false;
}

Endpoint dpdk_client_bind(const DpdkOptions&) { return Endpoint::v4(0, 0); }

std::size_t dpdk_send_forged(rt::Driver&, std::span<const ForgedDatagram>) { return 0; }

}  // namespace tern::app
