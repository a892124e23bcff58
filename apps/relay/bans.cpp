#include "bans.hpp"

#include <algorithm>

namespace tern::relay {

bool same_address(const Endpoint& a, const Endpoint& b) { return a.addr == b.addr; }

void BanList::forget_ended(std::uint64_t now_ms) {
  std::erase_if(bans_, [&](const Ban& b) { return b.until_ms <= now_ms; });
}

bool BanList::add(const Endpoint& address, std::uint64_t until_ms, std::uint64_t now_ms) {
  Endpoint host = address;
  host.port = 0;
  for (Ban& b : bans_) {
    if (same_address(b.address, host)) {
      b.until_ms = until_ms;
      return true;
    }
  }
  if (bans_.size() >= kMaxBans) forget_ended(now_ms);
  if (bans_.size() >= kMaxBans) return false;
  bans_.push_back(Ban{host, until_ms});
  return true;
}

bool BanList::remove(const Endpoint& address) {
  return std::erase_if(bans_, [&](const Ban& b) { return same_address(b.address, address); }) != 0;
}

bool BanList::refuses(const Endpoint& from, std::uint64_t now_ms) const {
  return std::any_of(bans_.begin(), bans_.end(), [&](const Ban& b) {
    return b.until_ms > now_ms && same_address(b.address, from);
  });
}

std::vector<BanList::Ban> BanList::running(std::uint64_t now_ms) const {
  std::vector<Ban> out;
  for (const Ban& b : bans_) {
    if (b.until_ms > now_ms) out.push_back(b);
  }
  return out;
}

}  // namespace tern::relay
