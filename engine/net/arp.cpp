// ARP cache and resolver (net_arp.hpp).
#include "net_arp.hpp"

namespace tern::net {

// ---- ArpTable ---------------------------------------------------------------------------------

ArpTable::Entry* ArpTable::find(std::uint32_t ip) {
  for (auto& e : entries_) {
    if (e.state != State::empty && e.ip == ip) return &e;
  }
  return nullptr;
}

const ArpTable::Entry* ArpTable::find(std::uint32_t ip) const {
  for (const auto& e : entries_) {
    if (e.state != State::empty && e.ip == ip) return &e;
  }
  return nullptr;
}

ArpTable::Entry* ArpTable::find_or_insert(std::uint32_t ip) {
  if (Entry* e = find(ip)) return e;
  // Victim rank: empty < failed < resolved < pending; within a rank, the earliest deadline.
  auto rank = [](const Entry& e) {
    switch (e.state) {
      case State::empty: return 0;
      case State::failed: return 1;
      case State::resolved: return 2;
      case State::pending: return 3;
    }
    return 3;
  };
  Entry* victim = nullptr;
  for (auto& e : entries_) {
    if (e.is_static) continue;
    if (victim == nullptr || rank(e) < rank(*victim) ||
        (rank(e) == rank(*victim) && e.deadline < victim->deadline)) {
      victim = &e;
    }
  }
  if (victim == nullptr) return nullptr;
  *victim = Entry{};
  victim->ip = ip;
  return victim;
}

bool ArpTable::set_static(std::uint32_t ip, MacAddress mac) {
  Entry* e = find_or_insert(ip);
  if (e == nullptr) return false;
  *e = Entry{};
  e->ip = ip;
  e->mac = mac;
  e->state = State::resolved;
  e->is_static = true;
  return true;
}

bool ArpTable::remove(std::uint32_t ip) {
  Entry* e = find(ip);
  if (e == nullptr) return false;
  *e = Entry{};
  return true;
}

std::size_t ArpTable::size() const {
  std::size_t n = 0;
  for (const auto& e : entries_) n += e.state != State::empty ? 1 : 0;
  return n;
}

// ---- ArpResolver ------------------------------------------------------------------------------

ArpLookup ArpResolver::start_round(ArpTable::Entry& e, std::uint64_t now_us) {
  e.state = ArpTable::State::pending;
  e.requests = 1;
  e.deadline = now_us + config_.retry_us;
  ++counters_.requests;
  return {ArpLookup::Status::pending, MacAddress{}, true};
}

bool ArpResolver::retry_or_fail(ArpTable::Entry& e, std::uint64_t now_us) {
  if (e.requests < config_.max_requests) {
    ++e.requests;
    e.deadline = now_us + config_.retry_us;
    ++counters_.requests;
    return true;
  }
  e.state = ArpTable::State::failed;
  e.deadline = now_us + config_.failed_hold_us;
  ++counters_.failures;
  return false;
}

ArpLookup ArpResolver::lookup(std::uint32_t ip, std::uint64_t now_us) {
  if (ip == 0xffffffffu) return {ArpLookup::Status::resolved, MacAddress::broadcast(), false};
  ArpTable::Entry* e = table_.find_or_insert(ip);
  if (e == nullptr) {
    ++counters_.table_full;
    return {ArpLookup::Status::failed, MacAddress{}, false};
  }
  switch (e->state) {
    case ArpTable::State::empty: return start_round(*e, now_us);
    case ArpTable::State::resolved: {
      if (e->is_static) return {ArpLookup::Status::resolved, e->mac, false};
      if (now_us >= e->deadline) return start_round(*e, now_us);  // expired unanswered
      ArpLookup r{ArpLookup::Status::resolved, e->mac, false};
      if (now_us >= e->refresh_at) {
        r.send_request = true;
        e->refresh_at = now_us + config_.retry_us;
        ++counters_.requests;
      }
      return r;
    }
    case ArpTable::State::pending:
      if (now_us < e->deadline) return {ArpLookup::Status::pending, MacAddress{}, false};
      if (retry_or_fail(*e, now_us)) return {ArpLookup::Status::pending, MacAddress{}, true};
      return {ArpLookup::Status::failed, MacAddress{}, false};
    case ArpTable::State::failed:
      if (now_us >= e->deadline) return start_round(*e, now_us);
      return {ArpLookup::Status::failed, MacAddress{}, false};
  }
  return {ArpLookup::Status::failed, MacAddress{}, false};
}

ArpVerdict ArpResolver::on_arp(const ArpPacket& packet, std::uint64_t now_us) {
  ArpVerdict v;
  if (local_ip_ != 0 && packet.sender_ip == local_ip_) {
    v.conflict = true;
    ++counters_.conflicts;
    return v;
  }
  const bool for_us = local_ip_ != 0 && packet.target_ip == local_ip_;
  // Sender 0.0.0.0 is an address probe (RFC 5227): nothing to learn, but it is answered.
  if (packet.sender_ip != 0) {
    ArpTable::Entry* e = table_.find(packet.sender_ip);
    if (e == nullptr && for_us) e = table_.find_or_insert(packet.sender_ip);
    if (e != nullptr && !e->is_static) {
      e->mac = packet.sender_mac;
      e->state = ArpTable::State::resolved;
      e->requests = 0;
      e->deadline = now_us + config_.reachable_us;
      e->refresh_at = now_us + config_.refresh_us;
      v.learned = true;
      ++counters_.learned;
    }
  }
  if (for_us && packet.op == ArpPacket::Op::request) {
    v.reply = true;
    ++counters_.replies;
  }
  return v;
}

std::size_t ArpResolver::poll(std::uint64_t now_us, std::span<std::uint32_t> due) {
  std::size_t n = 0;
  for (auto& e : table_.entries()) {
    if (e.state == ArpTable::State::pending && now_us >= e.deadline) {
      if (e.requests < config_.max_requests && n == due.size()) continue;  // no room: stays due
      if (retry_or_fail(e, now_us)) due[n++] = e.ip;
    } else if (e.state == ArpTable::State::resolved && !e.is_static && now_us >= e.deadline) {
      e = ArpTable::Entry{};  // expired and nobody refreshed it
    }
  }
  return n;
}

std::uint64_t ArpResolver::next_deadline() const {
  std::uint64_t t = std::numeric_limits<std::uint64_t>::max();
  for (const auto& e : table_.entries()) {
    if (e.state == ArpTable::State::pending && e.deadline < t) t = e.deadline;
  }
  return t;
}

}  // namespace tern::net
