// The --dpdk-* command-line flags tern-ping and tern-loadgen share, as given (strings and
// numbers only: this header builds without DPDK). apps/common/dpdk_session turns them into a
// running port.
#pragma once

#include "common/cli.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::app {

struct DpdkOptions {
  std::string config;            // --dpdk-config FILE: a [dpdk] TOML section, the flags override it
  std::string port;              // --dpdk-port: device name or vdev spec
  std::string ip;                // --dpdk-ip A.B.C.D/NN
  std::string gateway;           // --dpdk-gateway A.B.C.D (optional)
  std::string gateway_mac;       // --dpdk-gateway-mac MAC (optional)
  std::string mac;               // --dpdk-mac MAC (optional; default the port's)
  std::vector<std::string> eal;  // --dpdk-eal "ARGS", split on spaces
  std::uint16_t local_port = 0;  // --dpdk-local-port: clients' UDP port (0: derived from the pid)
  unsigned mbufs = 0;            // --dpdk-mbufs (0: the config's)
  bool huge = false;             // --dpdk-huge: hugepages instead of --no-huge -m 512
};

// Reads the --dpdk-* flags. Without --driver dpdk (`dpdk` false) any of them is an error; with
// it, the build must have the DPDK driver (`built`) and --dpdk-port and --dpdk-ip are needed
// unless --dpdk-config names a file. False with a one-line reason.
bool read_dpdk_flags(const CommandLine& cl, bool dpdk, bool built, DpdkOptions& out,
                     std::string& error);

// "a  b c" -> {"a", "b", "c"}.
std::vector<std::string> split_words(std::string_view text);

}  // namespace tern::app
