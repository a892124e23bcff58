// tern-netem: a UDP impairment proxy in front of any UDP server (DESIGN §8).
//
//   tern-netem --listen 127.0.0.1:7000 --upstream 127.0.0.1:7777 --loss 5% --delay 25ms
//
// Every client source gets its own upstream socket, so the server sees one distinct peer per
// client; each direction of each flow has its own seeded PRNG. See README.md.
#include "options.hpp"
#include "proxy.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  tern::netem::Config config;
  std::string error;
  switch (tern::netem::parse_config(argc, argv, config, error)) {
    case tern::netem::ParseResult::ok: break;
    case tern::netem::ParseResult::usage:
      std::fprintf(stderr, "tern-netem: %s\n%s", error.c_str(), tern::netem::kUsage);
      return tern::netem::kExitUsage;
    case tern::netem::ParseResult::config:
      std::fprintf(stderr, "tern-netem: %s\n", error.c_str());
      return tern::netem::kExitFailure;
  }
  if (config.help) {
    std::fputs(tern::netem::kUsage, stdout);
    return tern::netem::kExitOk;
  }
  // SIGHUP reads the same file and flags again: the file's new impairments, the flags still
  // over them.
  auto reload = [argc, argv](tern::netem::Config& fresh, std::string& why) {
    return tern::netem::parse_config(argc, argv, fresh, why) == tern::netem::ParseResult::ok;
  };
  return tern::netem::run(config, reload);
}
