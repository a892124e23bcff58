#include "common/dpdk_options.hpp"

namespace tern::app {

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  while (!text.empty()) {
    const std::size_t start = text.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    text = text.substr(start);
    const std::size_t end = text.find(' ');
    words.emplace_back(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end);
  }
  return words;
}

bool read_dpdk_flags(const CommandLine& cl, bool dpdk, bool built, DpdkOptions& d,
                     std::string& error) {
  for (std::string_view f : cl.names()) {
    if (f.substr(0, 5) == "dpdk-" && !dpdk) {
      error = "--" + std::string(f) + " needs --driver dpdk";
      return false;
    }
  }
  if (!dpdk) return true;
  if (!built) {
    error = "--driver dpdk: this build has no DPDK driver (libdpdk not found at build time)";
    return false;
  }
  const auto port = cl.value("dpdk-port");
  const auto ip = cl.value("dpdk-ip");
  if (const auto v = cl.value("dpdk-config")) d.config = std::string(*v);
  if (d.config.empty() && (!port || port->empty() || !ip || ip->empty())) {
    error = "--driver dpdk needs --dpdk-port SPEC and --dpdk-ip A.B.C.D/NN (or --dpdk-config FILE)";
    return false;
  }
  if (port) d.port = std::string(*port);
  if (ip) d.ip = std::string(*ip);
  if (const auto v = cl.value("dpdk-gateway")) d.gateway = std::string(*v);
  if (const auto v = cl.value("dpdk-gateway-mac")) d.gateway_mac = std::string(*v);
  if (const auto v = cl.value("dpdk-mac")) d.mac = std::string(*v);
  if (const auto v = cl.value("dpdk-eal")) d.eal = split_words(*v);
  d.huge = cl.has("dpdk-huge");
  return read_uint(cl, "dpdk-local-port", 1, 65535, d.local_port, error) &&
         read_uint(cl, "dpdk-mbufs", 2048, 1u << 24, d.mbufs, error);
}

}  // namespace tern::app
