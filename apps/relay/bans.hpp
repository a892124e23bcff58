// Relay-level bans set through the admin endpoint (POST /admin/ban): an address, every port of
// it, refused until its ban ends. Each shard keeps its own copy (Relay posts every change to
// every shard, because the kernel may steer any port of the address to any shard), so the
// check on connect takes no lock. Times are the shard clock's milliseconds, passed in.
//
// Kept apart from the rest of the relay on purpose: when the engine's host-level ban list
// arrives (refusing before the handshake, not after it), Relay::ban and the connect check
// are the two places to point at it instead.
#pragma once

#include <tern/endpoint.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::relay {

class BanList {
 public:
  // Bounds the list, and with it the scan each connect pays.
  static constexpr std::size_t kMaxBans = 1024;

  struct Ban {
    Endpoint address;  // port 0: the address's every port is banned
    std::uint64_t until_ms = 0;
  };

  // Bans `address`'s host until `until_ms` (a ban already there gets the new end). False when
  // the list is full of bans still running at `now_ms`.
  bool add(const Endpoint& address, std::uint64_t until_ms, std::uint64_t now_ms);
  // True when the address had a ban (running or not).
  bool remove(const Endpoint& address);
  // A connect from `from` (any port) is refused while its address's ban runs.
  bool refuses(const Endpoint& from, std::uint64_t now_ms) const;
  // The bans still running at `now_ms`.
  std::vector<Ban> running(std::uint64_t now_ms) const;

 private:
  void forget_ended(std::uint64_t now_ms);
  std::vector<Ban> bans_;
};

// Same host, whatever the ports.
bool same_address(const Endpoint& a, const Endpoint& b);

}  // namespace tern::relay
