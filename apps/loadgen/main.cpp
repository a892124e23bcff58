// tern-loadgen: many clients in rooms against any ENet-compatible relay (DESIGN §8).
//
//   tern-loadgen --target 127.0.0.1:7777 --clients 1000 --room-size 8 --rate 30 --duration 10
//
// Client i connects with connect data first_room + i / room_size, which the relay reads as the
// room to put it in; every member (or, with --broadcast, each room's first member) then sends
// paced messages that the relay forwards to the rest of the room. Senders and receivers live in
// this one process, so every relayed copy is timed end to end on one steady clock and checked
// for routing, delivery, channel, duplication and order. See README.md.
#include "loadgen.hpp"
#include "options.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  tern::loadgen::Config config;
  std::string error;
  if (!tern::loadgen::parse_config(argc, argv, config, error)) {
    std::fprintf(stderr, "tern-loadgen: %s\n%s", error.c_str(), tern::loadgen::kUsage);
    return tern::loadgen::kExitUsage;
  }
  if (config.help) {
    std::fputs(tern::loadgen::kUsage, stdout);
    return tern::loadgen::kExitOk;
  }
  return tern::loadgen::run(config);
}
